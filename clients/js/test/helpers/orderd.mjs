// A real orderd for the tests: the binary built from this repository with
// go build, serving a database of its own created on the PostgreSQL at
// TEST_DATABASE_URL (default: localhost:5432, user postgres) and dropped
// at the end.
import { spawn, execFile } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import WebSocket from "ws";
import { OrderdClient } from "../../dist/index.js";
import { adminClient, adminURL } from "./postgres.mjs";

const repo = fileURLToPath(new URL("../../../../", import.meta.url));

let binary;
// build compiles orderd once per test process.
async function build() {
  if (!binary) {
    binary = (async () => {
      const dir = await mkdtemp(join(tmpdir(), "orderd-client-test-"));
      const out = join(dir, "orderd");
      await promisify(execFile)("go", ["build", "-o", out, "./cmd/orderd"], { cwd: repo, maxBuffer: 1 << 24 })
        .catch((err) => { throw new Error(`go build ./cmd/orderd failed: ${err.stderr || err.message}`); });
      process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
      return out;
    })();
  }
  return binary;
}

// database creates a database of the test's own and returns its URL and a
// function that drops it.
async function database() {
  const admin = await adminClient();
  const name = "orderd_client_" + randomBytes(6).toString("hex");
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminURL);
  url.pathname = "/" + name;
  return {
    url: url.toString(),
    async drop() {
      const c = await adminClient();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

// freePort is a port nobody listens on at the moment it returns (for a
// client pointed at a dead address).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// startOrderd starts `orderd serve` and waits until it is ready. env adds
// to or overrides its environment. The result's stop() ends it and drops
// its database; restart() stops and starts the process on the same
// address and database.
export async function startOrderd(env = {}) {
  const [bin, db] = await Promise.all([build(), database()]);
  const secret = randomBytes(32).toString("hex");
  // The first start asks for port 0 and reads the port it bound from its
  // log (a port picked here could be taken by another test's server before
  // orderd binds it); a restart asks for that port again.
  let port = 0;
  let url = "";
  const fullEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: db.url,
    ORDERD_JWT_SECRET: secret,
    ORDERD_OPS_ADDR: "127.0.0.1:0",
    ORDERD_LOG_FORMAT: "json",
    ORDERD_WEBHOOK_ALLOW_LOOPBACK: "true",
    ...env,
  };
  let proc = null;
  let log = "";
  const launch = async () => {
    log = "";
    proc = spawn(bin, ["serve"], { env: { ...fullEnv, ORDERD_ADDR: `127.0.0.1:${port}` }, stdio: ["ignore", "pipe", "pipe"] });
    const keep = (d) => { log = (log + d).slice(-20000); };
    proc.stdout.on("data", keep);
    proc.stderr.on("data", keep);
    const exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
    proc.exited = exited;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r(undefined), 100))]);
      if (gone !== undefined) throw new Error(`orderd serve exited with ${gone}: ${log.slice(-2000)}`);
      // Until this process says what it bound, an answer on the port may
      // be another process's.
      const bound = servingPort(log);
      if (bound !== undefined) {
        port = bound;
        url = `http://127.0.0.1:${port}`;
        try {
          const r = await fetch(url + "/readyz");
          if (r.ok) return;
        } catch { /* not listening yet */ }
      }
      if (Date.now() > deadline) throw new Error(`orderd serve not ready after 60 s: ${log.slice(-2000)}`);
    }
  };
  const halt = async () => {
    if (!proc) return;
    const p = proc;
    proc = null;
    p.kill("SIGTERM");
    const timer = setTimeout(() => p.kill("SIGKILL"), 15_000);
    await p.exited;
    clearTimeout(timer);
  };
  try {
    await launch();
  } catch (err) {
    await halt();
    await db.drop();
    throw err;
  }

  const token = (claims) => signJWT(secret, claims);
  return {
    url,
    port,
    token,
    log: () => log,
    // client makes a client for these claims against url (by default the
    // server itself; a proxy's address for the network tests).
    client(claims, options = {}) {
      return new OrderdClient({ baseUrl: url, token: claims && token(claims), WebSocket, ...options });
    },
    async restart() { await halt(); await launch(); },
    halt,
    launch,
    async stop() { await halt(); await db.drop(); },
  };
}

// servingPort is the public port named by the start-up line of a JSON log.
function servingPort(log) {
  for (const line of log.split("\n")) {
    try {
      const entry = JSON.parse(line);
      if (entry.msg === "orderd serving" && entry.addr) return Number(entry.addr.split(":").pop());
    } catch { /* not a whole JSON line */ }
  }
  return undefined;
}

export function signJWT(secret, claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const body = b64({ iat: now, exp: now + 3600, ...claims });
  const head = b64({ alg: "HS256", typ: "JWT" });
  const sig = createHmac("sha256", secret).update(head + "." + body).digest("base64url");
  return `${head}.${body}.${sig}`;
}
