/**
 * `npm start [-- --in-memory]`: the whole API on http://127.0.0.1:$PORT with real SSE
 * streaming, on DynamoDB Local (data in .easel/dynamodb, or nothing kept with --in-memory) or
 * on EASEL_DYNAMODB_ENDPOINT. Registers EASEL_API_KEY (or a generated key) as an admin key
 * of the tenant `local` and loads examples/.
 *
 * SIGINT/SIGTERM stop it gracefully and exit 0: no new connection is accepted, the turns in
 * flight (requests', and the in-process worker's) get EASEL_SHUTDOWN_GRACE_MS to finish, and
 * those still running then are aborted — they commit nothing and give their claim back, and
 * their clients get 503 `unavailable` (an SSE client a final `turn_error`), so a retry with the
 * same Idempotency-Key after a restart takes the turn at once.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { ConfigError, readConfig, readLocalConfig } from '../config';
import { modelBanner } from './model-banner';
import { settleInflight } from '../http/inflight';
import { newSecret } from '../http/routes/keys';
import { createShutdown } from '../runtime';
import { ensureTable } from '../store/setup';
import { buildLocalApp } from './app';
import { closeUnreadBodies } from './close-unread-bodies';
import { type GracefulServer, gracefulServer } from './graceful';
import { apiKeyProblem, LOCAL_DATA_DIR, MIN_KEY_LENGTH, LOCAL_TENANT, loadExamples, readExamples, registerLocalKey } from './bootstrap';
import { type DynamoDbLocal, startDynamoDbLocal } from './dynamodb-local';

const HOST = '127.0.0.1';
/** Bounds of the stop after the grace period, should a store call or a socket hang. */
const ABORTED_SETTLE_MS = 10_000;
const ANSWERS_OUT_MS = 5_000;

/** Whether `work` settles within `ms`. */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  const done = work.then(() => true as const, () => true as const);
  try {
    return await Promise.race([done, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<number> {
  const began = Date.now();
  // The AWS SDK warns about Node 20 on every client; Lambda runs nodejs22.x.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--in-memory');
  if (unknown.length > 0) return fail(`unknown argument ${unknown.join(' ')}; usage: npm start [-- --in-memory]`);
  const inMemory = args.includes('--in-memory');
  let local;
  try {
    local = readLocalConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) return fail(`invalid configuration:\n  ${error.problems.join('\n  ')}`);
    throw error;
  }
  const { port } = local;
  const envKey = local.apiKey;
  const keyProblem = envKey === undefined ? undefined : apiKeyProblem(envKey);
  if (keyProblem) return fail(`${keyProblem} (any string of ${MIN_KEY_LENGTH}+ characters; unset it to get a generated key)`);
  let config;
  try {
    config = readConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) return fail(`invalid configuration:\n  ${error.problems.join('\n  ')}`);
    throw error;
  }

  let ddb: DynamoDbLocal | undefined;
  let server: Server | undefined;
  let graceful: GracefulServer | undefined;
  let pump: NodeJS.Timeout | undefined;
  let queueIdle: (() => Promise<void>) | undefined;
  let closeQueue: (() => void) | undefined;
  let stopping: Promise<void> | undefined;
  // every turn this process runs, over HTTP, in the in-process worker or fired by the pump
  const shutdown = createShutdown();
  const grace = local.shutdownGraceMs;
  const stop = (signal?: string) =>
    (stopping ??= (async () => {
      clearInterval(pump);
      closeQueue?.();
      const closed = graceful?.stopAccepting();
      if (signal) console.log(`${signal}: stopping...`);
      const turns = shutdown.running;
      if (turns > 0) console.log(`${turns} turn${turns === 1 ? '' : 's'} in flight: up to ${grace} ms to finish (EASEL_SHUTDOWN_GRACE_MS)`);
      const finished = Promise.all([shutdown.settled(), settleInflight(), queueIdle?.()]);
      if (!(await within(finished, grace))) {
        const left = shutdown.running;
        shutdown.abort('the server is stopping');
        console.log(`aborted ${left} turn${left === 1 ? '' : 's'} still running after ${grace} ms: nothing of ${left === 1 ? 'it' : 'them'} was committed, the claims are given back`);
        await within(finished, ABORTED_SETTLE_MS);
      }
      // the answers of those turns go out; what is left (followers of a turn's events) is cut
      if (graceful) await within(graceful.answered(), ANSWERS_OUT_MS);
      graceful?.cut();
      await closed;
      await ddb?.stop();
    })());
  let resolveSignal: (signal: string) => void = () => undefined;
  const signalled = new Promise<string>((r) => (resolveSignal = r));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => resolveSignal(signal));

  if (inMemory && config.store.endpoint) console.error('easel: --in-memory has no effect: EASEL_DYNAMODB_ENDPOINT names the DynamoDB to use');
  const startup = (async () => {
    const endpoint = config.store.endpoint ?? (ddb = await startDynamoDbLocal(inMemory ? { inMemory: true } : { dataDir: LOCAL_DATA_DIR })).endpoint;
    const dbStarted = Date.now();
    // async and queued turns run in this process, through the same handler as the Lambda worker
    const { app, runtime, queueIdle: idle, closeQueue: close, pump: pumpTimers, defaultPublicUrl } = buildLocalApp({ ...config, store: { ...config.store, endpoint } }, { lifecycle: shutdown.lifecycle });
    queueIdle = idle;
    closeQueue = close;
    await ensureTable(runtime.dynamo, config.store.table);
    const { engine } = runtime;
    const secret = envKey ?? newSecret();
    const key = await registerLocalKey(engine.store, secret, envKey ? 'local admin (EASEL_API_KEY)' : `local admin (generated ${new Date().toISOString()})`);
    const examples = await loadExamples(engine.store, engine.registry, await readExamples());
    const log = (m: string, f: Record<string, unknown>) => console.error(`[easel] ${m}`, JSON.stringify(f));
    // the pump function's work (every minute on AWS), every few seconds here: due form timers fire
    let pumping = false;
    pump = setInterval(() => {
      if (pumping) return;
      pumping = true;
      pumpTimers()
        .then((report) => {
          if (report.fired > 0 || report.failed > 0) log('timers pumped', { ...report });
        }, (error: unknown) => log('the timer pump failed', { error: error instanceof Error ? error.message : String(error) }))
        .finally(() => (pumping = false));
    }, local.pumpMs);
    pump.unref();
    server = createAdaptorServer({ fetch: closeUnreadBodies(app.fetch) }) as Server;
    graceful = gracefulServer(server);
    await new Promise<void>((done, failed) => {
      server?.once('error', failed).listen(port, HOST, () => done());
    });
    const url = `http://${HOST}:${(server.address() as AddressInfo).port}`;
    defaultPublicUrl(url);
    const where = ddb ? `DynamoDB Local at ${endpoint} (${inMemory ? 'in memory: nothing is kept' : `data in ${LOCAL_DATA_DIR}`})` : `${endpoint} (EASEL_DYNAMODB_ENDPOINT)`;
    const shownKey = envKey ? '$EASEL_API_KEY' : secret;
    console.log(`Easel is listening on ${url}`);
    console.log(`DynamoDB: ${where}, table ${config.store.table} (ready after ${dbStarted - began} ms)`);
    console.log(envKey
      ? `API key: the value of EASEL_API_KEY (admin, tenant ${LOCAL_TENANT}, id ${key.id})`
      : `API key: ${secret} (admin, tenant ${LOCAL_TENANT}, id ${key.id}; generated for this start: set EASEL_API_KEY to keep one)`);
    console.log(modelBanner(config.llm));
    console.log(`Examples: ${examples.map((e) => `${e.id} (${e.action})`).join(', ')}`);
    console.log(`Try: curl -s -X POST ${url}/workflows/v1/workflows/ex-support-triage/execute -H "Authorization: Bearer ${shownKey}" -H 'Content-Type: application/json' -d '{"run_input":{"query":"a billing question"}}'`);
    console.log(`Ready in ${Date.now() - began} ms. Ctrl-C stops the server${ddb ? ' and DynamoDB Local' : ''}.`);
  })();

  const first = await Promise.race([startup.then(() => undefined, (error: unknown) => ({ error })), signalled.then((signal) => ({ signal }))]);
  if (first && 'error' in first) {
    await stop();
    const error = first.error as Error & { code?: string };
    if (error.code === 'EADDRINUSE') return fail(`port ${port} on ${HOST} is in use: stop what listens there or set PORT`);
    return fail(error.message || String(error));
  }
  const signal = first?.signal ?? (await signalled);
  await startup.catch(() => undefined); // a half-started DynamoDB Local is stopped too
  await stop(signal);
  console.log('Stopped.');
  return 0;
}

function fail(message: string): number {
  console.error(`easel: ${message}`);
  return 1;
}

process.exitCode = await main();
// A lingering socket or timer must not keep a stopped server alive.
setTimeout(() => process.exit(), 200).unref();
