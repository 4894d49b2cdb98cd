/**
 * The parent's side of the local stack: DynamoDB Local (or EASEL_DYNAMODB_ENDPOINT), the
 * table, and bench/stack-server.ts in a child process; turns over HTTP; ideal protocols of
 * recorded turns over IPC.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { readStoreConfig } from '../../lib/config';
import { startDynamoDbLocal, type DynamoDbLocal } from '../../lib/local/dynamodb-local';
import { buildStore } from '../../lib/runtime/store';
import { keys, SESSION_HEAD_SK, TURN_PREFIX } from '../../lib/store/item-keys';
import { type DynamoClients, ensureTable } from '../../lib/store/setup';
import type { StackMessage, StackRequest, TraceSummary } from '../stack-server';
import { turnInput } from '../workflow';
import type { ReplayResult } from './recorder';

export const BENCH_TABLE = 'easel-bench';

export interface Database extends DynamoClients {
  endpoint: string;
  table: string;
  /** How it was obtained, for the report. */
  description: string;
  stop(): Promise<void>;
}

/** DynamoDB Local in memory, unless EASEL_DYNAMODB_ENDPOINT names a DynamoDB; the table made. */
export async function openDatabase(): Promise<Database> {
  const external = readStoreConfig().endpoint;
  let local: DynamoDbLocal | undefined;
  const started = Date.now();
  const endpoint = external ?? (local = await startDynamoDbLocal({ inMemory: true })).endpoint;
  const { client, store } = buildStore({ endpoint, table: BENCH_TABLE });
  const clients: DynamoClients = { client, doc: store.doc };
  await ensureTable(clients.client, BENCH_TABLE);
  return {
    ...clients,
    endpoint,
    table: BENCH_TABLE,
    description: local
      ? `DynamoDB Local (in memory, launched for the bench in ${Date.now() - started} ms)`
      : `the DynamoDB at EASEL_DYNAMODB_ENDPOINT=${endpoint}`,
    async stop() {
      clients.client.destroy();
      await local?.stop();
    },
  };
}

export interface TurnOutcome {
  ms: number;
  status: number;
  body: any;
}

export interface Stack {
  url: string;
  tenant: string;
  workflowId: string;
  /** Bytes the server has written to stdout (its logs) so far. */
  logBytes(): number;
  /** One turn over HTTP, recorded under `trace`. `turn` is 1-based. */
  turn(session: Session, trace: string): Promise<TurnOutcome>;
  summaries(traces: string[]): Promise<TraceSummary[]>;
  /** The ideal protocol of the turn recorded under `trace`, issued bare by the server's client. */
  ideal(trace: string): Promise<ReplayResult>;
  forget(traces: string[]): Promise<void>;
  close(): Promise<void>;
}

/** A conversation driven by the bench: its run id once started, and the turns done. */
export interface Session {
  runId?: string;
  done: number;
}

/** BENCH_PROFILE=<dir>: node flags that make a child write a V8 CPU profile to <dir>/<name>. */
export function profileArgs(name: string): string[] {
  const dir = process.env.BENCH_PROFILE;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, name)}`] : [];
}

export function newTraceId(): string {
  return randomBytes(8).toString('hex');
}

export interface StackOptions {
  /** The DynamoDB endpoint the server uses instead of the database's own (a latency proxy). */
  endpoint?: string;
  /** Names the server's CPU profile directory under BENCH_PROFILE. @default 'stack' */
  name?: string;
  /** Which Lambda entry point's wiring (bench/stack-server.ts BENCH_ENTRY). @default 'buffered' */
  entry?: 'stream' | 'buffered';
}

export async function startStack(db: Database, options: StackOptions = {}): Promise<Stack> {
  // the server's logs go to a file (as a Lambda's go to its log pipe), counted, then removed
  const logDir = mkdtempSync(join(tmpdir(), 'easel-bench-logs-'));
  const logFile = join(logDir, 'server.log');
  const logFd = openSync(logFile, 'w');
  const child: ChildProcess = fork(fileURLToPath(new URL('../stack-server.ts', import.meta.url)), [], {
    // BENCH_PROFILE=<dir> writes a V8 CPU profile of the server (open it in Chrome DevTools)
    execArgv: ['--import', 'tsx', ...profileArgs(options.name ?? 'stack')],
    stdio: ['ignore', logFd, 'inherit', 'ipc'],
    env: {
      ...process.env,
      EASEL_DYNAMODB_ENDPOINT: options.endpoint ?? db.endpoint,
      EASEL_DYNAMODB_TABLE: db.table,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_SERVICE_NAME: 'easel',
      BENCH_ENTRY: options.entry ?? 'buffered',
    },
  });
  closeSync(logFd);
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const ready = new Promise<Extract<StackMessage, { type: 'ready' }>>((resolve, reject) => {
    child.on('message', (message: StackMessage) => {
      if (message.type === 'ready') resolve(message);
      else {
        const waiter = pending.get(message.id);
        pending.delete(message.id);
        if (message.error !== undefined) waiter?.reject(new Error(message.error));
        else waiter?.resolve(message.result);
      }
    });
    child.once('exit', (code) => {
      const error = new Error(`the stack server exited (${code})`);
      reject(error);
      for (const w of pending.values()) w.reject(error);
    });
  });
  const info = await ready;
  const rpc = <T>(request: StackRequest): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, ...request });
    });
  const executeUrl = `${info.url}/workflows/v1/workflows/${info.workflowId}/execute`;

  return {
    url: info.url,
    tenant: info.tenant,
    workflowId: info.workflowId,
    logBytes: () => statSync(logFile).size,
    async turn(session, trace) {
      const n = session.done + 1;
      const body = JSON.stringify({
        ...(session.runId ? { run_id: session.runId, turn_number: session.done } : {}),
        run_input: turnInput(n),
      });
      const started = performance.now();
      const res = await fetch(executeUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${info.apiKey}`, 'content-type': 'application/json', 'x-bench-trace': trace },
        body,
      });
      const text = await res.text();
      const ms = performance.now() - started;
      let parsed: any;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
      if (res.status === 200) {
        session.runId = parsed.run_id;
        session.done = parsed.turn_number;
      }
      return { ms, status: res.status, body: parsed };
    },
    summaries: (traces) => rpc({ op: 'summary', traces }),
    ideal: (trace) => rpc({ op: 'ideal', trace }),
    forget: async (traces) => {
      await rpc({ op: 'forget', traces });
    },
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.disconnect();
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/** Turn records and the head of a session partition: what a reader would find. */
export async function sessionItems(db: Database, tenant: string, runId: string): Promise<{ turns: number; headTurn: number | undefined }> {
  let turns = 0;
  let headTurn: number | undefined;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db.doc.send(new QueryCommand({
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :t)',
      ExpressionAttributeValues: { ':pk': keys.session(tenant, runId), ':t': TURN_PREFIX },
      // a head lists its turn as `tn` (lib/store/sessions.ts), records and older heads as `turn`
      ProjectionExpression: 'sk, tn, turn',
      ConsistentRead: true,
      ExclusiveStartKey: start,
    }));
    for (const item of page.Items ?? []) {
      if (item.sk === SESSION_HEAD_SK) headTurn = (item.tn ?? item.turn) as number;
      else turns++;
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return { turns, headTurn };
}
