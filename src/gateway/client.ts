import { SwitchboardError } from "../errors.js";

/** A minimal RPC client for the CLI (API.md §4). */
export class RpcClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token?: string,
  ) {}

  async call<T = unknown>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    let res: Response;
    try {
      res = await fetch(new URL("/rpc", this.baseUrl), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        },
        body: JSON.stringify({ id: 1, method, params }),
      });
    } catch (err) {
      throw new SwitchboardError(
        "UNAVAILABLE",
        `cannot reach the gateway at ${this.baseUrl} (${(err as Error).cause ?? (err as Error).message}); is \`switchboard start\` running? (--url to point elsewhere)`,
      );
    }
    const body = (await res.json().catch(() => null)) as
      | { ok: true; result: T }
      | { ok: false; error: { code: string; message: string } }
      | null;
    if (!body)
      throw new SwitchboardError("INTERNAL", `gateway answered HTTP ${res.status} without a JSON body`);
    if (!body.ok)
      throw new SwitchboardError(body.error.code as "INTERNAL", `${body.error.code}: ${body.error.message}`);
    return body.result;
  }
}
