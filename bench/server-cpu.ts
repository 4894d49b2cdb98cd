/**
 * 5. Server CPU per turn against its own SDK calls. functions/http.ts's handler, in a process
 * of its own (bench/lambda-driver.ts), invoked with API Gateway HTTP API events as Lambda
 * invokes it, one turn at a time; after each turn, the same process replays the turn's DynamoDB
 * calls bare with the handler's own client. CPU per turn from process.cpuUsage() around each.
 * Afterwards every session and mirror is read back: every turn committed, the head at the last.
 */
import { fork } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DriverMessage, DriverRequest, DriverTurn } from './lambda-driver';
import { mirrorId } from './lib/recorder';
import { type Database, profileArgs, sessionItems } from './lib/stack';
import { fmt, heading, mean, median, p95, ratio, table } from './lib/stats';

export type ServerCpuOptions = DriverRequest;

export interface ServerCpuResult {
  turns: number;
  handlerCpuMsP50: number;
  handlerCpuMsMean: number;
  handlerCpuMsP95: number;
  sdkCpuMsP50: number;
  sdkCpuMsMean: number;
  /** Handler CPU / bare SDK CPU per turn, medians. */
  ratio: number;
  handlerMsP50: number;
  roundTripsPerTurn: number;
  componentsPerTurn: number;
  /** Share of turns that completed a pass. */
  completedPerTurn: number;
  /** Bytes of log lines (request log + EMF metrics) per invocation. */
  logBytesPerTurn: number;
  replayFailures: number;
  /** Turns missing on a session or its mirror, or heads behind, when read back. */
  lost: number;
}

export async function serverCpu(db: Database, options: ServerCpuOptions): Promise<ServerCpuResult> {
  heading(
    '5. Server CPU per turn against its own SDK calls',
    `functions/http.ts's handler (built from the environment as on Lambda: readConfig -> buildRuntime -> createApp -> hono/aws-lambda handle), in a process of its own (bench/lambda-driver.ts), invoked with API Gateway HTTP API payload 2.0 events and a Lambda context, ${options.sessions} conversations x ${options.turnsPerSession} turns of the bench workflow one at a time after ${options.warmupSessions} of warm-up; after each turn the same process replays the turn's DynamoDB calls bare with the handler's own client (mirror session); CPU per turn = process.cpuUsage() around each; DynamoDB Local as it is.`,
  );
  const logDir = mkdtempSync(join(tmpdir(), 'easel-bench-lambda-'));
  const logFile = join(logDir, 'stdout.log');
  const logFd = openSync(logFile, 'w');
  const child = fork(fileURLToPath(new URL('lambda-driver.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx', ...profileArgs('lambda')],
    stdio: ['ignore', logFd, 'inherit', 'ipc'],
    env: {
      ...process.env,
      EASEL_DYNAMODB_ENDPOINT: db.endpoint,
      EASEL_DYNAMODB_TABLE: db.table,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_SERVICE_NAME: 'easel',
      AWS_LAMBDA_FUNCTION_NAME: 'easel-http',
    },
  });
  closeSync(logFd);
  let done: Extract<DriverMessage, { type: 'done' }>;
  let logBytes: number;
  try {
    const reply = await new Promise<DriverMessage>((resolve, reject) => {
      child.once('message', (message: DriverMessage) => resolve(message));
      child.once('exit', (code) => reject(new Error(`the Lambda driver exited (${code}) before it answered`)));
      child.send(options);
    });
    if (reply.type === 'error') throw new Error(`the Lambda driver failed: ${reply.error}`);
    done = reply;
    await new Promise<void>((resolve) => (child.exitCode === null ? child.once('exit', () => resolve()) : resolve()));
    logBytes = statSync(logFile).size;
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(logDir, { recursive: true, force: true });
  }

  let lost = 0;
  for (const runId of done.runIds) {
    for (const id of [runId, mirrorId(runId)]) {
      const found = await sessionItems(db, done.tenant, id);
      lost += Math.max(0, options.turnsPerSession - found.turns) + (found.headTurn === options.turnsPerSession ? 0 : 1);
    }
  }
  const turns = done.turns;
  const ms = (us: number) => us / 1000;
  const groups: [string, DriverTurn[]][] = [
    ['all turns', turns],
    ['first turn (creates the run)', turns.filter((t) => t.kind === 'first')],
    ['query -> pause at the form', turns.filter((t) => t.kind === 'pause')],
    ['form answer -> completed', turns.filter((t) => t.kind === 'answer')],
  ];
  table(
    ['turns', 'n', 'handler CPU p50 ms', 'bare SDK calls CPU p50 ms', 'ratio', 'handler CPU mean ms', 'bare calls CPU mean ms', 'handler wall p50 ms', 'round trips'],
    groups.filter(([, g]) => g.length > 0).map(([name, g]) => {
      const handler = median(g.map((t) => t.handlerCpuUs));
      const sdk = median(g.map((t) => t.sdkCpuUs));
      return [name, g.length, ms(handler), ms(sdk), ratio(handler, sdk), ms(mean(g.map((t) => t.handlerCpuUs))), ms(mean(g.map((t) => t.sdkCpuUs))), median(g.map((t) => t.handlerMs)), mean(g.map((t) => t.operations.length))];
    }),
  );
  const result: ServerCpuResult = {
    turns: turns.length,
    handlerCpuMsP50: ms(median(turns.map((t) => t.handlerCpuUs))),
    handlerCpuMsMean: ms(mean(turns.map((t) => t.handlerCpuUs))),
    handlerCpuMsP95: ms(p95(turns.map((t) => t.handlerCpuUs))),
    sdkCpuMsP50: ms(median(turns.map((t) => t.sdkCpuUs))),
    sdkCpuMsMean: ms(mean(turns.map((t) => t.sdkCpuUs))),
    ratio: ratio(median(turns.map((t) => t.handlerCpuUs)), median(turns.map((t) => t.sdkCpuUs))),
    handlerMsP50: median(turns.map((t) => t.handlerMs)),
    roundTripsPerTurn: mean(turns.map((t) => t.operations.length)),
    componentsPerTurn: mean(turns.map((t) => t.components)),
    completedPerTurn: mean(turns.map((t) => (t.completed ? 1 : 0))),
    // warm-up invocations logged too: the log bytes are per invocation of the whole run
    logBytesPerTurn: logBytes / ((options.warmupSessions + options.sessions) * options.turnsPerSession),
    replayFailures: done.replayFailures,
    lost,
  };
  console.log(`handler CPU per turn ${fmt(result.handlerCpuMsP50)} ms p50 (${fmt(result.handlerCpuMsMean)} mean, ${fmt(result.handlerCpuMsP95)} p95) against ${fmt(result.sdkCpuMsP50)} ms for its DynamoDB calls bare: x${fmt(result.ratio)} (reported, not held); ${fmt(result.componentsPerTurn, 1)} components and ${fmt(result.logBytesPerTurn, 0)} log bytes per invocation`);
  console.log(`read back: turns lost (missing records or heads behind, sessions + mirrors): ${lost}; replayed calls refused: ${result.replayFailures}`);
  return result;
}
