import { type ChildProcess, spawn } from "node:child_process";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { deserializeMessage, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { within } from "../../retry/index.js";

/**
 * The SDK's stdio client transport, with one difference: the server runs in its own process
 * group (`detached`), so stopping it stops everything it started (`kill(-pid)`), and a server
 * that ignores SIGTERM is killed after a grace period. The SDK's `StdioClientTransport` spawns
 * without `detached` and kills only the direct child, which leaves grandchildren (an `npx`
 * wrapper's node, a shell's children) running. Framing and message validation are the SDK's
 * (`serializeMessage` / `deserializeMessage`, one JSON-RPC message per line).
 *
 * Lines are collected as a list of chunks (no re-copying of a growing buffer: a 10 MB answer is
 * one copy), and a line longer than `maxLineBytes` closes the transport with an error that says so.
 */

export interface GroupStdioParams {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  maxLineBytes: number;
  /** Each line the server writes to stderr (never part of a prompt). */
  onStderr(line: string): void;
  /** Grace between SIGTERM and SIGKILL of the group on close. */
  killGraceMs?: number;
}

export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  #child: ChildProcess | undefined;
  #chunks: Buffer[] = [];
  #size = 0;
  #closed = false;
  /** Why the process ended (exit code or signal), once it has. */
  exitReason: string | undefined;

  constructor(private readonly params: GroupStdioParams) {}

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): Promise<void> {
    if (this.#child) throw new Error("GroupStdioTransport already started");
    const { params } = this;
    return new Promise((resolve, reject) => {
      const child = spawn(params.command, params.args, {
        env: { ...getDefaultEnvironment(), ...params.env },
        stdio: ["pipe", "pipe", "pipe"],
        cwd: params.cwd,
        detached: process.platform !== "win32",
        windowsHide: true,
        shell: false,
      });
      this.#child = child;
      child.once("error", (err) => {
        reject(err);
        this.onerror?.(err);
        this.#ended();
      });
      child.once("spawn", () => resolve());
      child.once("exit", (code, signal) => {
        this.exitReason = signal ? `killed by ${signal}` : `exited with code ${code}`;
      });
      child.once("close", () => this.#ended());
      child.stdin?.on("error", (err) => this.onerror?.(err));
      child.stdout?.on("data", (chunk: Buffer) => this.#read(chunk));
      let errLine = "";
      child.stderr?.setEncoding("utf8");
      child.stderr?.on("data", (s: string) => {
        errLine += s;
        let i = errLine.indexOf("\n");
        while (i >= 0) {
          params.onStderr(errLine.slice(0, i));
          errLine = errLine.slice(i + 1);
          i = errLine.indexOf("\n");
        }
        // a server that never ends a line is logged in pieces
        if (errLine.length > 8192) {
          params.onStderr(errLine);
          errLine = "";
        }
      });
    });
  }

  #read(chunk: Buffer): void {
    let start = 0;
    let nl = chunk.indexOf(10);
    while (nl >= 0) {
      const part = chunk.subarray(start, nl);
      const line =
        this.#chunks.length === 0 ? part : Buffer.concat([...this.#chunks, part], this.#size + part.length);
      this.#chunks = [];
      this.#size = 0;
      this.#deliver(line.toString("utf8").replace(/\r$/, ""));
      if (this.#closed) return;
      start = nl + 1;
      nl = chunk.indexOf(10, start);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.#size += rest.length;
      this.#chunks.push(rest);
      if (this.#size > this.params.maxLineBytes) {
        this.#chunks = [];
        this.#size = 0;
        this.onerror?.(
          new Error(`a message from the server is larger than ${this.params.maxLineBytes} bytes`),
        );
        void this.close();
      }
    }
  }

  #deliver(line: string): void {
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch (err) {
      this.onerror?.(
        new Error(`the server wrote a line that is not a JSON-RPC message: ${(err as Error).message}`),
      );
      return;
    }
    this.onmessage?.(message);
  }

  #ended(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#chunks = [];
    this.onclose?.();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.#child?.stdin;
      if (!stdin || this.#closed) {
        reject(new Error("not connected"));
        return;
      }
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Ends stdin, then SIGTERM to the process group, then SIGKILL after the grace period. */
  async close(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    const gone = () => child.exitCode !== null || child.signalCode !== null;
    const exited = new Promise<void>((resolve) => {
      if (gone()) resolve();
      else child.once("exit", () => resolve());
    });
    const wait = (ms: number) => within(exited, ms).then(gone);
    try {
      child.stdin?.end();
    } catch {
      // already closed
    }
    const grace = this.params.killGraceMs ?? 2000;
    signalGroup(child, "SIGTERM");
    if (!(await wait(grace))) {
      signalGroup(child, "SIGKILL");
      await wait(grace);
    } else {
      // the leader is gone; anything it left behind in its group goes too
      signalGroup(child, "SIGKILL");
    }
    this.#ended();
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    if (process.platform === "win32") child.kill(signal);
    else process.kill(-child.pid, signal);
  } catch {
    // the group is already gone
  }
}
