/**
 * `npm start` in a child process, for the suites of test/local: the command of package.json's
 * `start` script (node --import tsx lib/local/server.ts) with an environment of the test's own.
 * A server is ready when it says so on stdout; the test waits for what it prints, never for a
 * fixed time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../../lib/local/bootstrap';

export const TSX = join(REPO_ROOT, 'node_modules', '.bin', 'tsx');

/** `npm start`'s command as package.json states it, its `node` this test's own Node. */
function startCommand(): { command: string; args: string[] } {
  const script: string = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).scripts.start;
  const [node, ...args] = script.replace(/^exec /, '').split(' ');
  if (node !== 'node') throw new Error(`npm start no longer runs node directly: ${script}`);
  return { command: process.execPath, args };
}

export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** True when nothing listens on the port (DynamoDB Local binds 0.0.0.0, the server 127.0.0.1). */
export function portFree(port: number, host: string): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen(port, host, () => server.close(() => done(true)));
  });
}

/** The environment of a child: the parent's, minus what would change its behaviour. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
  for (const name of Object.keys(env)) if (name.startsWith('EASEL_') || name === 'PORT') delete env[name];
  return { ...env, ...extra };
}

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves once stdout contains `text` (at once if it does already); rejects if the process exits first. */
  printed(text: string): Promise<void>;
  /** Resolves once stderr (the server's log) has `count` lines matching `pattern`; rejects if the process exits first. */
  logged(pattern: RegExp, count?: number): Promise<void>;
}

export interface Running extends Spawned {
  url: string;
}

const children = new Set<ChildProcess>();

/** Stops the servers a failed test left behind (call it in afterAll). */
export async function stopLeftovers(): Promise<void> {
  await Promise.all([...children].map(async (child) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  }));
  children.clear();
}

export function spawnServer(env: Record<string, string>, args: string[] = []): Spawned {
  const start = startCommand();
  const child = spawn(start.command, [...start.args, ...args], { cwd: REPO_ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  const waiters = new Set<{ text: string; resolve: () => void }>();
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters) {
      if (!out.includes(w.text)) continue;
      waiters.delete(w);
      w.resolve();
    }
  });
  const logWaiters = new Set<{ pattern: RegExp; count: number; resolve: () => void }>();
  const matching = (pattern: RegExp) => err.split('\n').filter((line) => pattern.test(line)).length;
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    for (const w of logWaiters) {
      if (matching(w.pattern) < w.count) continue;
      logWaiters.delete(w);
      w.resolve();
    }
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const logged = (pattern: RegExp, count = 1) => {
    if (matching(pattern) >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      logWaiters.add({ pattern, count, resolve });
      void exited.then(() => (matching(pattern) >= count ? resolve() : reject(new Error(`the server exited without logging ${pattern} ${count} times:\n${err}`))));
    });
  };
  const printed = (text: string) => {
    if (out.includes(text)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      waiters.add({ text, resolve });
      void exited.then(() => {
        // the last output is read before 'exit' is handled
        if (out.includes(text)) resolve();
        else reject(new Error(`the server exited without printing "${text}":\n${out}\n${err}`));
      });
    });
  };
  return { child, stdout: () => out, stderr: () => err, exited, printed, logged };
}

/** Starts a server on a free port with `key` as its admin key; resolves once it is ready. */
export async function startServer(key: string, env: Record<string, string>, args: string[] = []): Promise<Running> {
  const port = await freePort();
  const spawned = spawnServer({ PORT: String(port), EASEL_API_KEY: key, ...env }, args);
  // "Ready in" comes after /health answers, the examples and the key are in
  await spawned.printed('Ready in');
  return { ...spawned, url: `http://127.0.0.1:${port}` };
}

/** Sends `signal` (none: it was sent already) and resolves with the exit code. */
export async function stopServer(server: Spawned, signal: NodeJS.Signals | null = 'SIGINT'): Promise<number | null> {
  if (signal) server.child.kill(signal);
  const code = await server.exited;
  children.delete(server.child);
  return code;
}

export async function api(url: string, key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any; text: string }> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text };
}
