// Shared by the console's browser tests: start `hermes serve` on free
// ports, call its REST API, run its CLI.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

export const bin = resolve(process.env.HERMES_BIN ?? join(import.meta.dirname, '..', '..', '..', 'bin', 'hermes'));
export const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const run = promisify(execFile);

async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.unref();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** Starts `hermes serve` with extra flags; resolves once /readyz is ready. */
export async function startNode(extra = []) {
  const dir = mkdtempSync(join(tmpdir(), 'hermes-console-'));
  const [grpc, http, raft] = [await freePort(), await freePort(), await freePort()];
  const args = [
    'serve', '--data-dir', join(dir, 'data'),
    '--grpc-addr', `127.0.0.1:${grpc}`, '--http-addr', `127.0.0.1:${http}`, '--raft-addr', `127.0.0.1:${raft}`,
    '--kafka-addr', '', '--wire-addr', '', '--log-level', 'warn',
    ...extra.map((a) => a.replace('{dir}', dir)),
  ];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const base = `http://127.0.0.1:${http}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`hermes serve exited ${proc.exitCode}: ${stderr}`);
    try {
      if ((await fetch(base + '/readyz')).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('hermes serve not ready in 30s: ' + stderr);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    grpc: `127.0.0.1:${grpc}`,
    dir,
    async stop() {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function rest(node, auth) {
  return async (method, path, body) => {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (auth) headers.Authorization = auth;
    const r = await fetch(node.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : undefined };
  };
}

export const cli = (node, ...args) => run(bin, [...args, '--addr', node.grpc], { timeout: 30_000 });

