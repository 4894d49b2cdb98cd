/**
 * Counting and recording DynamoDB calls, and replaying them bare. A thin decorator over the
 * DocumentClient's `send`: every call still goes to DynamoDB; the decorator only notes its
 * command (kind and input, by reference) and its latency in the trace of the request it
 * belongs to (AsyncLocalStorage). `replay` issues a recorded sequence again, command by
 * command, on a mirror session: the run id is swapped for another of the same length, so the
 * items, their sizes and the conditions are the same and hold the same way.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactGetCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { SESSION_HEAD_SK } from '../../lib/store/item-keys';

export interface RecordedCall {
  /** Command class name, e.g. `UpdateCommand`. */
  name: string;
  input: Record<string, unknown>;
  /** Latency of the call as the caller saw it. */
  ms: number;
}

export interface Trace {
  calls: RecordedCall[];
}

export const traceContext = new AsyncLocalStorage<Trace>();

/** Installs the recording decorator on `doc` (once). Calls outside a trace are only forwarded. */
export function instrument(doc: DynamoDBDocumentClient): void {
  const marked = doc as unknown as { __benchInstrumented?: boolean };
  if (marked.__benchInstrumented) return;
  marked.__benchInstrumented = true;
  const original = doc.send.bind(doc) as Send;
  (doc as unknown as { send: Send }).send = recording(original);
}

/**
 * Installs the recording decorator on every DocumentClient of this process, those not created
 * yet included (the prototype's `send`): for code that builds its own clients inside a module
 * (functions/http.ts). `lastClient()` is the client of the latest recorded call.
 */
export function instrumentEveryClient(): { lastClient(): DynamoDBDocumentClient | undefined } {
  const proto = DynamoDBDocumentClient.prototype as unknown as { send: Send; __benchInstrumented?: boolean };
  let last: DynamoDBDocumentClient | undefined;
  if (!proto.__benchInstrumented) {
    proto.__benchInstrumented = true;
    const original = proto.send;
    proto.send = function (this: DynamoDBDocumentClient, command: unknown, ...rest: unknown[]) {
      if (traceContext.getStore()) last = this;
      return recording(original.bind(this) as Send)(command, ...rest);
    };
  }
  return { lastClient: () => last };
}

type Send = (command: unknown, ...rest: unknown[]) => Promise<unknown>;

function recording(original: Send): Send {
  return async (command: unknown, ...rest: unknown[]) => {
    const trace = traceContext.getStore();
    if (!trace) return original(command, ...rest);
    const call: RecordedCall = {
      name: (command as object).constructor.name,
      input: (command as { input: Record<string, unknown> }).input,
      ms: 0,
    };
    trace.calls.push(call);
    const started = performance.now();
    try {
      return await original(command, ...rest);
    } finally {
      call.ms = performance.now() - started;
    }
  };
}

const COMMANDS: Record<string, new (input: never) => unknown> = {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactGetCommand,
  TransactWriteCommand,
  UpdateCommand,
};

/** DynamoDB operation name of a command class name (`UpdateCommand` -> `UpdateItem`). */
export function operationName(commandName: string): string {
  const base = commandName.replace(/Command$/, '');
  return ['Get', 'Put', 'Update', 'Delete'].includes(base) ? `${base}Item` : base;
}

/** The run (session) id a recorded sequence works on, from the session partition key. */
export function runIdOf(calls: readonly RecordedCall[]): string | undefined {
  let found: string | undefined;
  const visit = (value: unknown): void => {
    if (found) return;
    if (typeof value === 'string') {
      const m = /#S#([0-9a-f]{32})/.exec(value);
      if (m) found = m[1];
    } else if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === 'object' && !(value instanceof Uint8Array)) Object.values(value).forEach(visit);
  };
  for (const c of calls) visit(c.input);
  return found;
}

/** Another run id of the same length: the mirror session of `runId`. */
export function mirrorId(runId: string): string {
  return createHash('sha256').update(`mirror:${runId}`).digest('hex').slice(0, runId.length);
}

/** A copy of `value` with every occurrence of `from` in its strings replaced by `to`. */
export function rewrite(value: unknown, from: string, to: string): unknown {
  if (typeof value === 'string') return value.includes(from) ? value.split(from).join(to) : value;
  if (value instanceof Uint8Array || value === null || typeof value !== 'object') return value;
  if (value instanceof Set) return new Set([...value].map((v) => rewrite(v, from, to)));
  if (Array.isArray(value)) return value.map((v) => rewrite(v, from, to));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[rewrite(k, from, to) as string] = rewrite(v, from, to);
  return out;
}

/** Commands ready to send again on the mirror session (built ahead, outside any timing). */
export function prepareReplay(calls: readonly RecordedCall[]): unknown[] {
  const runId = runIdOf(calls);
  return calls.map((c) => {
    const Command = COMMANDS[c.name];
    if (!Command) throw new Error(`cannot replay ${c.name}`);
    const input = runId ? rewrite(c.input, runId, mirrorId(runId)) : c.input;
    return new Command(input as never);
  });
}

export interface ReplayResult {
  ms: number;
  /** CPU time of this process during the replay (µs); meaningful when nothing else runs. */
  cpuUs: number;
  /** Calls DynamoDB refused (a condition that held on the real session failed on its mirror). */
  failures: number;
}

/** Sends prepared commands one after another, as the turn did. */
export async function replay(doc: DynamoDBDocumentClient, commands: readonly unknown[]): Promise<ReplayResult> {
  let failures = 0;
  const send = doc.send.bind(doc) as (command: unknown) => Promise<unknown>;
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (const command of commands) {
    try {
      await send(command);
    } catch {
      failures++;
    }
  }
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { ms, cpuUs: used.user + used.system, failures };
}

/**
 * The best protocol a turn could have, on the turn's mirror session: one consistent Query (the
 * turn's own; for a first turn, the same shape) and one conditional Put of the turn's record —
 * the same items and sizes the turn read and wrote, nothing else. `syncHead` then makes the
 * mirror's head a copy of the real one (outside any timing), so the next ideal reads what the
 * next turn reads.
 */
export interface IdealTurn {
  commands: [QueryCommand, PutCommand];
  syncHead(doc: DynamoDBDocumentClient): Promise<void>;
}

const TURN_RECORD_SK = /^T#\d{8}$/;

export function prepareIdeal(calls: readonly RecordedCall[]): IdealTurn {
  let record: Record<string, unknown> | undefined;
  let table: string | undefined;
  for (const c of calls) {
    const puts = c.name === 'PutCommand' ? [c.input] : c.name === 'TransactWriteCommand' ? (c.input.TransactItems as { Put?: Record<string, unknown> }[]).flatMap((t) => (t.Put ? [t.Put] : [])) : [];
    for (const put of puts) {
      const item = put.Item as Record<string, unknown>;
      // the last write into a turn slot is the commit (a claim, when there is one, comes first)
      if (typeof item.sk === 'string' && TURN_RECORD_SK.test(item.sk)) {
        record = item;
        table = put.TableName as string;
      }
    }
  }
  if (!record || !table) throw new Error('the turn wrote no turn record');
  const pk = record.pk as string;
  const runId = runIdOf(calls);
  if (!runId) throw new Error('the turn names no session');
  const mirror = mirrorId(runId);
  const query = calls.find((c) => c.name === 'QueryCommand' && (c.input.ExpressionAttributeValues as Record<string, unknown> | undefined)?.[':pk'] === pk)?.input
    ?? { TableName: table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :t)', ExpressionAttributeValues: { ':pk': pk, ':t': 'T#' }, ScanIndexForward: false, Limit: 3, ConsistentRead: true };
  const onMirror = <T>(value: T) => rewrite(value, runId, mirror) as T;
  return {
    commands: [
      new QueryCommand(onMirror(query) as never),
      new PutCommand({ TableName: table, Item: onMirror(record), ConditionExpression: 'attribute_not_exists(pk)' }),
    ],
    async syncHead(doc) {
      const { Item } = await doc.send(new GetCommand({ TableName: table, Key: { pk, sk: SESSION_HEAD_SK }, ConsistentRead: true }));
      if (Item) await doc.send(new PutCommand({ TableName: table, Item: onMirror(Item) }));
    },
  };
}
