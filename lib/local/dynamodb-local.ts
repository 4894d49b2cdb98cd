/**
 * Launches AWS's DynamoDB Local (the jar shipped in `amplify-dynamodb-simulator`) as a child
 * process: for `npm start` and the test suite. Amplify's own JS launcher does not work from
 * node_modules, so we spawn `java` ourselves. `-sharedDb` matters: without it DynamoDB Local
 * keeps one database per access key and region, and a client with other credentials would see
 * an empty table.
 *
 * @example
 * const ddb = await startDynamoDbLocal({ dataDir: '.easel/dynamodb' });
 * console.log(ddb.endpoint); // http://127.0.0.1:41234
 * await ddb.stop();
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { EaselError } from '../errors';
import { LOCAL_CREDENTIALS } from '../store/setup';

export interface DynamoDbLocalOptions {
  /** Port to listen on. @default a free port chosen at start */
  port?: number;
  /** Directory of the persistent database (created if missing). Ignored when `inMemory`. */
  dataDir?: string;
  /** Keep the database in memory only. @default true when no `dataDir` is given */
  inMemory?: boolean;
  /** Receives each line DynamoDB Local prints (stdout and stderr). @default discard */
  log?: (line: string) => void;
  /** The Java executable. @default 'java' (looked up on PATH) */
  javaCommand?: string;
  /** How long to wait for the first successful ListTables (a JVM on a busy machine can take many seconds). @default 60_000 ms */
  readyTimeoutMs?: number;
}

export interface DynamoDbLocal {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  port: number;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>;
}

/** Thrown when DynamoDB Local cannot be started (no usable Java, crash, or timeout). */
export class DynamoDbLocalError extends EaselError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('dynamodb_local_unavailable', message, options);
  }
}

export const JAVA_REQUIRED_MESSAGE =
  'DynamoDB Local needs Java 11 or newer: install a JDK (e.g. `apt-get install openjdk-17-jre-headless`) or set EASEL_DYNAMODB_ENDPOINT to an existing DynamoDB';

const MIN_JAVA = 11;
const STOP_GRACE_MS = 5_000;
const TAIL_CHARS = 4_000;

export async function startDynamoDbLocal(options: DynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  const java = options.javaCommand ?? 'java';
  await checkJava(java);
  const inMemory = options.inMemory ?? options.dataDir === undefined;
  let dataDir: string | undefined;
  if (!inMemory) {
    if (options.dataDir === undefined) throw new DynamoDbLocalError('startDynamoDbLocal: dataDir is required unless inMemory is set');
    dataDir = resolve(options.dataDir);
    await mkdir(dataDir, { recursive: true });
  }
  // A JVM that cannot bind its port keeps running, and the port's owner would answer our
  // readiness probe: refuse a taken port up front.
  if (options.port !== undefined && !(await portAvailable(options.port))) {
    throw new DynamoDbLocalError(`DynamoDB Local cannot listen on port ${options.port}: it is already in use`);
  }
  // A free port found by binding :0 may be taken again before Java binds it: retry a couple
  // of times with a fresh one when we chose it ourselves.
  const attempts = options.port === undefined ? 3 : 1;
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    try {
      return await launch({ java, port, dataDir, log: options.log, readyTimeoutMs: options.readyTimeoutMs ?? 60_000 });
    } catch (error) {
      if (attempt >= attempts || !(error instanceof PortInUseError)) throw error;
    }
  }
}

class PortInUseError extends DynamoDbLocalError {}

function emulatorDir(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('amplify-dynamodb-simulator/package.json')), 'emulator');
}

/** Rejects with JAVA_REQUIRED_MESSAGE when `java` is missing or older than 11. */
async function checkJava(java: string): Promise<void> {
  const output = await new Promise<string>((done, fail) => {
    execFile(java, ['-version'], { timeout: 10_000 }, (error, stdout, stderr) => {
      if (error) fail(new DynamoDbLocalError(JAVA_REQUIRED_MESSAGE, { cause: error }));
      else done(`${stderr}\n${stdout}`);
    });
  });
  const major = javaMajorVersion(output);
  if (major === undefined || major < MIN_JAVA) {
    throw new DynamoDbLocalError(`${JAVA_REQUIRED_MESSAGE} (found: ${output.trim().split('\n')[0] ?? 'unknown'})`);
  }
}

/** `openjdk version "17.0.15"` -> 17; `java version "1.8.0_292"` -> 8. */
export function javaMajorVersion(versionOutput: string): number | undefined {
  const match = /version "(\d+)(?:\.(\d+))?/.exec(versionOutput);
  if (!match) return undefined;
  const first = Number(match[1]);
  return first === 1 && match[2] !== undefined ? Number(match[2]) : first;
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.unref();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/** DynamoDB Local binds 0.0.0.0, so that is what must be free. */
function portAvailable(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.unref();
    server.once('error', () => done(false));
    server.listen(port, '0.0.0.0', () => server.close(() => done(true)));
  });
}

/**
 * A tiny `sh` that stops the JVM once its stdin pipe closes, i.e. when this process dies by any
 * means: SIGKILL, or the SIGTERM with which vitest ends its workers, run no 'exit' handlers.
 * Killed as soon as the JVM exits. Not available on Windows (no `sh`): best effort.
 * Exported for its test only.
 */
export function startWatchdog(pid: number): ChildProcess | undefined {
  if (process.platform === 'win32') return undefined;
  const script =
    `read _; kill -TERM ${pid} 2>/dev/null || exit 0; ` +
    `for i in 1 2 3 4 5; do sleep 1; kill -0 ${pid} 2>/dev/null || exit 0; done; kill -KILL ${pid} 2>/dev/null`;
  const dog = spawn('sh', ['-c', script], { stdio: ['pipe', 'ignore', 'ignore'] });
  dog.on('error', () => {}); // no sh: no watchdog
  dog.stdin?.on('error', () => {});
  // Neither the process nor the pipe may keep this process alive.
  dog.unref();
  (dog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return dog;
}

interface LaunchOptions {
  java: string;
  port: number;
  dataDir: string | undefined;
  log: ((line: string) => void) | undefined;
  readyTimeoutMs: number;
}

async function launch({ java, port, dataDir, log, readyTimeoutMs }: LaunchOptions): Promise<DynamoDbLocal> {
  const dir = emulatorDir();
  const args = [
    `-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`,
    '-jar', join(dir, 'DynamoDBLocal.jar'),
    ...(dataDir === undefined ? ['-inMemory'] : ['-dbPath', dataDir]),
    '-port', String(port),
    '-disableTelemetry',
    '-sharedDb',
  ];
  const child = spawn(java, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const watchdog = child.pid === undefined ? undefined : startWatchdog(child.pid);
  let stderrTail = '';
  let exited = false;
  let spawnFailure: NodeJS.ErrnoException | undefined;
  // 'close' comes after 'exit' once stdout/stderr are drained, so the tail is complete; a
  // process that never started emits 'error' and no 'close'.
  const exit = new Promise<void>((done) => {
    const finish = () => {
      exited = true;
      watchdog?.kill('SIGKILL'); // its pid argument may be reused from now on
      done();
    };
    child.once('close', finish);
    child.once('error', (error) => {
      if (child.pid !== undefined) return;
      spawnFailure = error;
      finish();
    });
  });
  const lines = (stream: NodeJS.ReadableStream, isStderr: boolean) => {
    let pending = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      if (isStderr) stderrTail = (stderrTail + chunk).slice(-TAIL_CHARS);
      pending += chunk;
      const parts = pending.split(/\r?\n/);
      pending = parts.pop() ?? '';
      for (const line of parts) log?.(line);
    });
    stream.on('end', () => {
      if (pending) log?.(pending);
    });
  };
  lines(child.stdout!, false);
  lines(child.stderr!, true);

  // If the parent exits without calling stop(), do not leave a JVM behind (the watchdog covers
  // the deaths that run no 'exit' handlers).
  const killOnExit = () => {
    if (!exited) child.kill('SIGKILL');
  };
  process.on('exit', killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (!exited) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exit;
        clearTimeout(timer);
      }
      process.off('exit', killOnExit);
    })();
    return stopping;
  };

  /** Why startup cannot succeed any more, if it cannot. */
  const startupFailure = (): DynamoDbLocalError | undefined => {
    if (spawnFailure) {
      const message = spawnFailure.code === 'ENOENT' ? JAVA_REQUIRED_MESSAGE : `DynamoDB Local could not be started: ${spawnFailure.message}`;
      return new DynamoDbLocalError(message, { cause: spawnFailure });
    }
    const text = stderrTail.trim();
    // After a failed bind the JVM stays up (Jetty's threads), so look for it, not for an exit.
    if (/Failed to bind|BindException|Address already in use/i.test(text)) {
      return new PortInUseError(`DynamoDB Local could not listen on port ${port}:\n${text}`);
    }
    if (!exited) return undefined;
    return new DynamoDbLocalError(`DynamoDB Local exited during startup (${child.exitCode ?? child.signalCode})${text ? `:\n${text}` : ''}`);
  };

  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitUntilReady(endpoint, readyTimeoutMs, startupFailure, () => stderrTail);
  } catch (error) {
    await stop();
    throw error;
  }
  return { endpoint, port, stop };
}

/** Polls ListTables with the real SDK until it answers, the process dies, or the deadline. */
async function waitUntilReady(
  endpoint: string,
  timeoutMs: number,
  startupFailure: () => Error | undefined,
  tail: () => string,
): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { ...LOCAL_CREDENTIALS },
    maxAttempts: 1,
    // Whatever holds the port may accept and never answer: each probe must end.
    requestHandler: { connectionTimeout: 1_000, requestTimeout: 2_000, throwOnRequestTimeout: true },
  });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const failure = startupFailure();
      if (failure) throw failure;
      try {
        await client.send(new ListTablesCommand({ Limit: 1 }));
        return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        const text = tail().trim();
        throw new DynamoDbLocalError(`DynamoDB Local did not answer within ${timeoutMs} ms${text ? `:\n${text}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.destroy();
  }
}
