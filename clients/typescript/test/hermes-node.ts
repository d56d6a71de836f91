/**
 * Starts a real `hermes serve` process for the tests: a temporary data
 * directory, free loopback ports, wait for GET /readyz, stop by PID.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The package's directory (clients/typescript), found from this file. */
export const PKG_DIR = ((): string => {
  let d = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(d, "package.json"))) {
    const up = dirname(d);
    if (up === d) throw new Error("package.json not found above the tests");
    d = up;
  }
  return d;
})();

/** The repository's root. */
export const REPO_DIR = resolve(PKG_DIR, "..", "..");

/** The hermes binary: $HERMES_BIN, else bin/hermes of the repository. */
export function hermesBin(): string {
  const bin = process.env["HERMES_BIN"] ?? join(REPO_DIR, "bin", "hermes");
  if (!existsSync(bin)) {
    throw new Error(
      `the hermes binary is not at ${bin}: build it (make build at the repository root) or set HERMES_BIN`,
    );
  }
  return bin;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", rej);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

/** A running node. */
export class HermesNode {
  private constructor(
    public proc: ChildProcess,
    readonly dir: string,
    /** The gRPC address, "127.0.0.1:port". */
    readonly grpcAddr: string,
    readonly httpAddr: string,
    private readonly args: string[],
    /** With TLS listeners: the CA that signed the node's certificate. */
    private readonly ca: Buffer | undefined,
  ) {}

  /**
   * Starts a node with `extra` flags (made from its directory). Free ports
   * are found by binding and letting go: another process may take one
   * first, so a start that fails with "address already in use" is tried
   * again on other ports.
   */
  static async start(extra: (dir: string) => string[] = () => [], tlsCaFile?: string): Promise<HermesNode> {
    const bin = hermesBin();
    for (let attempt = 1; ; attempt++) {
      const dir = mkdtempSync(join(tmpdir(), "hermes-ts-test-"));
      const [grpc, http, raft] = [await freePort(), await freePort(), await freePort()];
      const grpcAddr = `127.0.0.1:${grpc}`;
      const httpAddr = `127.0.0.1:${http}`;
      const log = openSync(join(dir, "hermes.log"), "a");
      const args = [
        "serve",
        "--data-dir", join(dir, "data"),
        "--grpc-addr", grpcAddr,
        "--http-addr", httpAddr,
        "--raft-addr", `127.0.0.1:${raft}`,
        "--kafka-addr", "",
        "--wire-addr", "",
        "--log-level", "warn",
        ...extra(dir),
      ];
      const proc = spawn(bin, args, { stdio: ["ignore", log, log] });
      const ca = tlsCaFile === undefined ? undefined : readFileSync(tlsCaFile);
      const node = new HermesNode(proc, dir, grpcAddr, httpAddr, args, ca);
      try {
        await node.waitReady();
        return node;
      } catch (e) {
        await node.stop(false);
        const text = node.log();
        rmSync(dir, { recursive: true, force: true });
        if (attempt < 3 && text.includes("address already in use")) continue;
        throw new Error(`${(e as Error).message}\n${text}`);
      }
    }
  }

  /**
   * Stops the node (SIGTERM: a graceful stop) and starts it again on the
   * same ports and data directory.
   */
  async restart(): Promise<void> {
    await this.stop(false);
    const log = openSync(join(this.dir, "hermes.log"), "a");
    this.proc = spawn(hermesBin(), this.args, { stdio: ["ignore", log, log] });
    try {
      await this.waitReady();
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${this.log()}`);
    }
  }

  log(): string {
    try {
      return readFileSync(join(this.dir, "hermes.log"), "utf8");
    } catch {
      return "";
    }
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`hermes serve exited (${this.proc.exitCode ?? this.proc.signalCode}) before it was ready`);
      }
      if ((await this.readyz()) === 200) return;
      if (Date.now() > deadline) throw new Error("hermes serve was not ready in 30 s");
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** GET /readyz: its status, 0 when the node does not answer. */
  private readyz(): Promise<number> {
    return new Promise((res) => {
      const url = `${this.ca === undefined ? "http" : "https"}://${this.httpAddr}/readyz`;
      const done = (code: number): void => res(code);
      const req =
        this.ca === undefined
          ? httpGet(url, { timeout: 1000 }, (r) => {
              r.resume();
              done(r.statusCode ?? 0);
            })
          : httpsGet(url, { timeout: 1000, ca: this.ca }, (r) => {
              r.resume();
              done(r.statusCode ?? 0);
            });
      req.on("error", () => done(0));
      req.on("timeout", () => req.destroy());
    });
  }

  /** Stops the process by its PID (SIGTERM, then SIGKILL) and removes its directory. */
  async stop(removeDir = true): Promise<void> {
    const p = this.proc;
    if (p.exitCode === null && p.signalCode === null && p.pid !== undefined) {
      const exited = new Promise<void>((r) => p.once("exit", () => r()));
      process.kill(p.pid, "SIGTERM");
      const t = setTimeout(() => {
        if (p.exitCode === null && p.signalCode === null && p.pid !== undefined) process.kill(p.pid, "SIGKILL");
      }, 10_000);
      await exited;
      clearTimeout(t);
    }
    if (removeDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Writes a password file for --bootstrap-password-file. */
export function passwordFile(dir: string, password: string): string {
  mkdirSync(dir, { recursive: true });
  const f = join(dir, "bootstrap-password");
  writeFileSync(f, password + "\n", { mode: 0o600 });
  return f;
}

/** Checks that the binary knows a flag (for a clear error with an old build). */
export function serveHelp(): string {
  const r = spawnSync(hermesBin(), ["serve", "--help"], { encoding: "utf8" });
  return r.stdout + r.stderr;
}

/** A unique topic name for a test. */
let seq = 0;
export function topicName(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${++seq}`;
}

/** Waits until `cond` holds, polling; fails after `ms`. */
export async function eventually(cond: () => boolean | Promise<boolean>, ms = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
