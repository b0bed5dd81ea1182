import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  type AuthenticationCreds,
  type SignalDataTypeMap,
  useMultiFileAuthState,
} from "@whiskeysockets/baileys";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from "vitest";
import { migrateAuthDir, useStoreAuthState } from "../../channels/whatsapp/auth.js";
import { createWhatsAppChannel, type WhatsAppSocketFactory } from "../../channels/whatsapp/index.js";
import type { AuthStateStore } from "../../src/channels/types.js";
import { main } from "../../src/cli/main.js";
import { type Logger, silentLogger } from "../../src/log.js";
import { RedisAuthStateStore } from "../../src/store/redis/auth-state.js";
import { RedisKeys } from "../../src/store/redis/keys.js";
import { FakeWhatsApp, ManualTimers } from "../fakes/whatsapp.js";
import { eventually, REDIS_URL, randomPrefix, tempDir } from "../helpers.js";
import { describeRedis, newRedisClient, startMonitor } from "../redis.js";

/** A logger that remembers its messages (the migration must say what it did). */
function recordingLogger(lines: string[]): Logger {
  const log = silentLogger();
  const record = (_obj: unknown, msg?: string) => void lines.push(msg ?? String(_obj));
  return Object.assign(Object.create(log) as Logger, {
    warn: record,
    info: record,
    error: record,
    child: () => recordingLogger(lines),
  });
}

const preKey = (n: number): SignalDataTypeMap["pre-key"] => ({
  public: Buffer.from([n, 1, 2, 3, 255]),
  private: Buffer.alloc(32, n),
});

describeRedis("whatsapp auth state in redis (issue 50 item 3)", () => {
  let client: Redis;
  let prefix: string;
  let dir: string;
  let removeDir: () => void;
  const storeFor = (account = "main"): RedisAuthStateStore =>
    new RedisAuthStateStore(client, prefix, "whatsapp", account);
  const hashKey = (account = "main") => new RedisKeys(prefix).authState("whatsapp", account);

  beforeAll(() => {
    client = newRedisClient();
  });
  afterAll(async () => {
    await client.quit();
  });
  beforeEach(() => {
    prefix = randomPrefix("wa-auth");
    ({ dir, cleanup: removeDir } = tempDir("sb-wa-auth-"));
  });
  afterEach(async () => {
    const keys = await client.keys(`{${prefix}}:*`);
    if (keys.length) await client.del(...keys);
    removeDir();
  });

  it("round-trips creds and signal keys (Buffers included) under the store prefix; new logins get initAuthCreds", async () => {
    const first = await useStoreAuthState(storeFor());
    // Nothing stored yet: a fresh login, as initAuthCreds makes it.
    expect(first.state.creds.registered).toBe(false);
    expect(Buffer.isBuffer(first.state.creds.noiseKey.private)).toBe(true);
    first.state.creds.me = { id: "4915550000001:7@s.whatsapp.net", name: "Switchboard" };
    first.state.creds.registered = true;
    await first.saveCreds();
    await first.state.keys.set({
      "pre-key": { "1": preKey(1), "2": preKey(2) },
      session: { "4915550000002.0": Buffer.from("session-bytes") as never },
      "app-state-sync-key": {
        AAAAAbc: { keyData: Buffer.from([9, 9, 9]), timestamp: 1_700_000_000 } as never,
      },
    });

    // Everything sits in one hash under the store's hash tag.
    expect(await client.exists(hashKey())).toBe(1);
    expect((await client.keys(`{${prefix}}:*`)).sort()).toEqual([hashKey()]);

    const again = await useStoreAuthState(storeFor());
    expect(again.state.creds.me?.id).toBe("4915550000001:7@s.whatsapp.net");
    expect(again.state.creds.registered).toBe(true);
    expect(Buffer.compare(again.state.creds.noiseKey.private, first.state.creds.noiseKey.private)).toBe(0);
    expect(Buffer.isBuffer(again.state.creds.signedIdentityKey.public)).toBe(true);
    const keys = await again.state.keys.get("pre-key", ["1", "2", "3"]);
    expect(Object.keys(keys).sort()).toEqual(["1", "2"]);
    expect(Buffer.isBuffer(keys["1"]?.private)).toBe(true);
    expect(keys["2"]?.public).toEqual(preKey(2).public);
    const sessions = await again.state.keys.get("session", ["4915550000002.0"]);
    expect(Buffer.from(sessions["4915550000002.0"] as Uint8Array).toString()).toBe("session-bytes");
    const sync = await again.state.keys.get("app-state-sync-key", ["AAAAAbc"]);
    expect(Buffer.from(sync.AAAAAbc?.keyData ?? []).toJSON().data).toEqual([9, 9, 9]);

    // null deletes.
    await again.state.keys.set({ "pre-key": { "1": null } });
    expect(Object.keys(await again.state.keys.get("pre-key", ["1", "2"]))).toEqual(["2"]);
  });

  it("writes a key batch in one MULTI/EXEC", async () => {
    const { state } = await useStoreAuthState(storeFor());
    const commands: string[][] = [];
    const stop = await startMonitor((args) => {
      if (args.some((a) => a.includes(prefix)) || ["multi", "exec"].includes(args[0]?.toLowerCase() ?? ""))
        commands.push(args);
    });
    try {
      await state.keys.set({ "pre-key": { "5": preKey(5), "6": preKey(6), "7": null } });
      await eventually(() => commands.some((c) => c[0]?.toLowerCase() === "exec"), 200);
    } finally {
      stop();
    }
    const names = commands.map((c) => c[0]?.toLowerCase());
    const multi = names.indexOf("multi");
    const exec = names.indexOf("exec");
    expect(multi).toBeGreaterThanOrEqual(0);
    expect(names.slice(multi, exec + 1)).toEqual(["multi", "hset", "hdel", "exec"]);
    // Both keys in the one HSET inside the transaction.
    expect(commands[multi + 1]).toEqual(expect.arrayContaining(["pre-key-5", "pre-key-6"]));
  });

  it("migrates a useMultiFileAuthState dir once, and never overwrites what Redis holds", async () => {
    // A dir exactly as Baileys writes it.
    const files = await useMultiFileAuthState(dir);
    files.state.creds.me = { id: "4915550000001:7@s.whatsapp.net" };
    files.state.creds.registered = true;
    await files.saveCreds();
    await files.state.keys.set({
      "pre-key": { "1": preKey(1) },
      "sender-key": { "g@g.us::a::0": Buffer.from("sk") as never },
    });
    expect(existsSync(path.join(dir, "creds.json"))).toBe(true);

    const lines: string[] = [];
    const log = recordingLogger(lines);
    const store = storeFor();
    expect(await migrateAuthDir(dir, store, log)).toBe(3);
    expect(lines.filter((l) => /one-time migration/.test(l))).toHaveLength(1);

    const moved = await useStoreAuthState(store);
    expect(moved.state.creds.me?.id).toBe("4915550000001:7@s.whatsapp.net");
    expect(Buffer.compare(moved.state.creds.noiseKey.public, files.state.creds.noiseKey.public)).toBe(0);
    expect((await moved.state.keys.get("pre-key", ["1"]))["1"]?.private).toEqual(preKey(1).private);
    const sk = await moved.state.keys.get("sender-key", ["g@g.us::a::0"]);
    expect(Buffer.from(sk["g@g.us::a::0"] as Uint8Array).toString()).toBe("sk");

    // Redis moves on (a new login elsewhere); the dir must never be copied over it again.
    moved.state.creds.me = { id: "4915550009999:1@s.whatsapp.net" };
    await moved.saveCreds();
    expect(await migrateAuthDir(dir, store, log)).toBe(0);
    expect((await useStoreAuthState(store)).state.creds.me?.id).toBe("4915550009999:1@s.whatsapp.net");
    expect(lines.filter((l) => /one-time migration/.test(l))).toHaveLength(1);

    // An empty dir, or none, is nothing to migrate.
    expect(await migrateAuthDir(path.join(dir, "none"), storeFor("other"), log)).toBe(0);
    expect(await storeFor("other").isEmpty()).toBe(true);
  });

  it("logout clears the account's keys in redis mode (and only that account's)", async () => {
    const a = await useStoreAuthState(storeFor("main"));
    await a.saveCreds();
    await a.state.keys.set({ "pre-key": { "1": preKey(1) } });
    const b = await useStoreAuthState(storeFor("second"));
    await b.saveCreds();
    const wa = new FakeWhatsApp();
    const adapter = createWhatsAppChannel(
      { accountId: "main" },
      { logger: silentLogger(), stateDir: dir, socketFactory: wa.factory, authStore: storeFor("main") },
    );
    await adapter.logout();
    expect(await client.exists(hashKey("main"))).toBe(0);
    expect(await client.exists(hashKey("second"))).toBe(1);
    // Relinking after a logout starts from fresh credentials.
    expect((await useStoreAuthState(storeFor("main"))).state.creds.registered).toBe(false);
  });

  it("a 401 from WhatsApp clears the Redis keys; a second adapter comes up linked (no QR) from the first's state", async () => {
    const wa = new FakeWhatsApp();
    // The fake socket over the real store-backed auth state: linked creds open, fresh ones show a QR.
    const creds: AuthenticationCreds[] = [];
    const factory: WhatsAppSocketFactory = async (opts) => {
      if (!opts.authStore) throw new Error("expected an auth store in redis mode");
      const auth = await useStoreAuthState(opts.authStore);
      creds.push(auth.state.creds);
      wa.autoOpen = false;
      const made = await wa.factory(opts);
      const socket = wa.current;
      setImmediate(() => (auth.state.creds.registered ? socket.open() : socket.qr("2@QR,fresh")));
      return { socket: made.socket, saveCreds: auth.saveCreds };
    };
    const make = (store: AuthStateStore, qrs: string[]) =>
      createWhatsAppChannel(
        { accountId: "main" },
        {
          logger: silentLogger(),
          stateDir: dir,
          socketFactory: factory,
          authStore: store,
          timers: new ManualTimers(),
          printQr: (qr) => void qrs.push(qr),
        },
      );

    const firstQrs: string[] = [];
    const first = make(storeFor(), firstQrs);
    await first.start(async () => {});
    expect(first.status().state).toBe("needs-login");
    expect(firstQrs).toEqual(["2@QR,fresh"]);
    // The phone scans: Baileys marks the creds registered and emits creds.update; the adapter saves.
    const linked = creds.at(-1) as AuthenticationCreds;
    linked.registered = true;
    linked.me = { id: "4915550000001:7@s.whatsapp.net" };
    wa.current.credsUpdate();
    await eventually(async () => (await useStoreAuthState(storeFor())).state.creds.registered, 200);
    await first.stop();

    // Another gateway (same Redis, no shared disk) takes the socket over: linked, no QR.
    const secondQrs: string[] = [];
    const second = make(storeFor(), secondQrs);
    await second.start(async () => {});
    expect(second.status().state).toBe("connected");
    expect(secondQrs).toEqual([]);
    expect(Buffer.compare(creds.at(-1)!.noiseKey.private, linked.noiseKey.private)).toBe(0);
    expect(existsSync(path.join(dir, "whatsapp", "main", "creds.json"))).toBe(false);

    // Unlinked on the phone: the saved login goes from Redis.
    wa.current.close(401, "logged out");
    await eventually(() => second.status().state === "needs-login", 200);
    await eventually(async () => (await client.exists(hashKey())) === 0, 200);
    await second.stop();
  });

  it("`switchboard whatsapp logout` clears Redis and the auth dir in redis mode, the files in fs mode", async () => {
    const authDir = path.join(dir, "state", "whatsapp", "main");
    const seedDir = () => {
      mkdirSync(authDir, { recursive: true });
      writeFileSync(path.join(authDir, "creds.json"), "{}");
      writeFileSync(path.join(authDir, "pre-key-1.json"), "{}");
    };
    const configFile = (storage: Record<string, unknown>) => {
      const file = path.join(dir, `switchboard-${String(storage.driver)}.json5`);
      writeFileSync(
        file,
        JSON.stringify({
          stateDir: path.join(dir, "state"),
          storage,
          ...(storage.driver === "redis" ? { queue: { driver: "bullmq", redisUrl: REDIS_URL } } : {}),
          channels: { whatsapp: { accounts: { main: {} } } },
        }),
      );
      return file;
    };
    const run = async (file: string, ...args: string[]) => {
      let out = "";
      let err = "";
      const code = await main(["whatsapp", "logout", ...args, "--config", file], {
        out: (s) => {
          out += s;
        },
        err: (s) => {
          err += s;
        },
      });
      return { code, out, err };
    };

    // redis mode
    const a = await useStoreAuthState(storeFor());
    await a.saveCreds();
    seedDir();
    const redisFile = configFile({ driver: "redis", redisUrl: REDIS_URL, prefix });
    const res = await run(redisFile);
    expect(res).toMatchObject({ code: 0, err: "" });
    expect(res.out).toMatch(/whatsapp main: logged out \(auth dir and Redis\)/);
    expect(await client.exists(hashKey())).toBe(0);
    expect(readdirSync(authDir)).toEqual([]);
    expect((await run(redisFile, "nope")).err).toMatch(/no WhatsApp account "nope"/);

    // fs mode
    seedDir();
    const fsRes = await run(configFile({ driver: "fs" }), "main");
    expect(fsRes.code).toBe(0);
    expect(readdirSync(authDir)).toEqual([]);
  });
});
