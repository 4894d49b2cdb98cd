/**
 * 2. Write cost vs conversation length. One conversation with the same output every turn,
 * through the turn engine (executeTurn, as the HTTP route calls it) on the bench table, with
 * ReturnConsumedCapacity on. Every write is cross-checked by arithmetic from the items' sizes
 * (read before and after each update with a second, unmetered client). Beside it, the same
 * conversation stored RAGFlow's way: the whole session row rewritten every turn.
 */
import { randomBytes } from 'node:crypto';
import { GetCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { keys } from '../lib/store/item-keys';
import { Canvas } from '../lib/canvas';
import { readConfig } from '../lib/config';
import { buildRuntime } from '../lib/runtime';
import { itemSize } from '../lib/store/blobs';
import { TABLE_DEFINITION } from '../lib/store/table';
import { createWorkflow } from '../lib/store/workflows';
import { executeTurn, type TurnEngine } from '../lib/turns/execute';
import { DEFAULT_QUOTA_SHARDS } from '../lib/turns/quotas';
import { processMessage } from '../lib/turns/queue';
import { fmt, heading, mean, table, verdict } from './lib/stats';
import type { Database } from './lib/stack';
import { benchDsl, benchWorkflow, turnInput } from './workflow';

export interface WriteCostOptions {
  turns: number;
  /** A second, shorter conversation whose turns carry an Idempotency-Key. */
  keyedTurns: number;
}

export interface TurnCost {
  turn: number;
  wcuReported: number;
  wcuFromSizes: number;
  rcuReported: number;
  rcuFromSizes: number;
  bytesWritten: number;
  roundTrips: number;
  ragflowBytes: number;
}

export interface WriteCostResult {
  checkpoints: TurnCost[];
  /** Turn N over turn 2, the larger of the WCU and bytes ratios. */
  growthRatio: number;
  wcuGrowth: number;
  bytesGrowth: number;
  ragflowGrowth: number;
  /** Means over every turn of the conversation (the first included). */
  meanWcu: number;
  meanRcu: number;
  meanRoundTrips: number;
  keyed: { meanWcu: number; meanRcu: number; meanRoundTrips: number };
  /** The keyed conversation's length again, each turn run by the queue worker (an async turn). */
  async: { meanWcu: number; meanRcu: number; meanRoundTrips: number };
  /**
   * The keyed conversation's length again with every quota on (tenant and end user, turns and
   * tokens; EASEL_QUOTA_*): its means, and what it adds to the same turns without quotas.
   */
  quotas: { meanWcu: number; meanRcu: number; meanRoundTrips: number; extraWcu: number; extraRcu: number; extraRoundTrips: number; shards: number };
  /** Reported and arithmetic figures disagreed on this many turns. */
  mismatches: number;
  /**
   * What the session cleanup's deletes cost when the session expires, divided by its turns:
   * the head goes by TTL (free); the consumer deletes every other item, charged by its size.
   */
  cleanupWruPerTurn: number;
}

const kb = (bytes: number) => Math.ceil(bytes / 1024);
const rcu = (bytes: number, consistent: boolean) => Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);

const gsi = TABLE_DEFINITION.GlobalSecondaryIndexes[0] as { KeySchema: { AttributeName: string }[]; Projection: { NonKeyAttributes: string[] } };
const TABLE_KEYS = TABLE_DEFINITION.KeySchema.map((k) => k.AttributeName);
const INDEX_KEYS = gsi.KeySchema.map((k) => k.AttributeName);
const INDEX_ATTRIBUTES = [...TABLE_KEYS, ...INDEX_KEYS, ...gsi.Projection.NonKeyAttributes];

/** The item's entry in the listing index, if it has one. */
function indexEntry(item: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!item || INDEX_KEYS.some((k) => item[k] === undefined)) return undefined;
  return Object.fromEntries(INDEX_ATTRIBUTES.filter((a) => item[a] !== undefined).map((a) => [a, item[a]]));
}

/** Index write units of a table write from `before` to `after` (DynamoDB's rules for a GSI). */
function indexUnits(before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined): number {
  const a = indexEntry(before);
  const b = indexEntry(after);
  if (!a && !b) return 0;
  if (!a) return kb(itemSize(b as Record<string, unknown>));
  if (!b) return kb(itemSize(a));
  if (INDEX_KEYS.some((k) => a[k] !== b[k])) return kb(itemSize(a)) + kb(itemSize(b));
  return JSON.stringify(a) === JSON.stringify(b) ? 0 : kb(Math.max(itemSize(a), itemSize(b)));
}

interface Meter {
  wcuReported: number;
  wcuFromSizes: number;
  rcuReported: number;
  rcuFromSizes: number;
  bytesWritten: number;
  roundTrips: number;
  /** Per call: operation, units reported / from sizes, bytes of the item. */
  calls: string[];
}

const emptyMeter = (): Meter => ({ wcuReported: 0, wcuFromSizes: 0, rcuReported: 0, rcuFromSizes: 0, bytesWritten: 0, roundTrips: 0, calls: [] });

/** Decorates `doc.send`: consumed capacity as reported, and as computed from the items. */
function meter(doc: DynamoDBDocumentClient, side: DynamoDBDocumentClient, table: string): { take(): Meter } {
  let current = emptyMeter();
  const original = doc.send.bind(doc) as (command: unknown) => Promise<any>;
  const read = async (key: unknown) =>
    (await side.send(new GetCommand({ TableName: table, Key: key as Record<string, unknown>, ConsistentRead: true }))).Item;
  (doc as unknown as { send: typeof original }).send = async (command: unknown) => {
    const name = (command as object).constructor.name;
    const input = (command as { input: any }).input;
    // a write is charged on the larger of the item before and after it (a Put may replace a claim)
    const before = name === 'UpdateCommand' || name === 'DeleteCommand' ? await read(input.Key)
      : name === 'PutCommand' ? await read({ pk: input.Item.pk, sk: input.Item.sk }) : undefined;
    const out = await original(command);
    const m = current;
    m.roundTrips++;
    const consumed = [out?.ConsumedCapacity ?? []].flat() as { CapacityUnits?: number }[];
    const units = consumed.reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
    const was = { w: m.wcuFromSizes + m.rcuFromSizes, b: m.bytesWritten };
    switch (name) {
      case 'PutCommand': {
        m.wcuReported += units;
        m.wcuFromSizes += kb(Math.max(itemSize(input.Item), before ? itemSize(before) : 0)) + indexUnits(before, input.Item);
        m.bytesWritten += itemSize(input.Item);
        break;
      }
      case 'DeleteCommand': {
        m.wcuReported += units;
        m.wcuFromSizes += before ? kb(itemSize(before)) + indexUnits(before, undefined) : 1;
        break;
      }
      case 'TransactWriteCommand': {
        // a transaction is charged twice the size of each item it writes
        m.wcuReported += units;
        for (const t of input.TransactItems as { Put?: { Item: Record<string, unknown> } }[]) {
          if (t.Put) {
            m.wcuFromSizes += 2 * kb(itemSize(t.Put.Item)) + indexUnits(undefined, t.Put.Item);
            m.bytesWritten += itemSize(t.Put.Item);
          }
        }
        break;
      }
      case 'UpdateCommand': {
        const after = await read(input.Key);
        m.wcuReported += units;
        m.wcuFromSizes += kb(Math.max(before ? itemSize(before) : 0, after ? itemSize(after) : 0)) + indexUnits(before, after);
        m.bytesWritten += after ? itemSize(after) : 0;
        break;
      }
      case 'BatchWriteCommand': {
        m.wcuReported += units;
        for (const r of input.RequestItems[table] ?? []) {
          if (r.PutRequest) {
            m.wcuFromSizes += kb(itemSize(r.PutRequest.Item));
            m.bytesWritten += itemSize(r.PutRequest.Item);
          } else m.wcuFromSizes += 1;
        }
        break;
      }
      case 'QueryCommand': {
        m.rcuReported += units;
        m.rcuFromSizes += rcu((out.Items ?? []).reduce((n: number, i: Record<string, unknown>) => n + itemSize(i), 0), input.ConsistentRead === true);
        break;
      }
      case 'GetCommand': {
        m.rcuReported += units;
        m.rcuFromSizes += rcu(out.Item ? itemSize(out.Item) : 0, input.ConsistentRead === true);
        break;
      }
      case 'BatchGetCommand': {
        m.rcuReported += units;
        // every key asked for is charged, found or not (at least half a unit each)
        const consistent = input.RequestItems[table]?.ConsistentRead === true;
        const found = new Map((out.Responses?.[table] ?? []).map((i: Record<string, unknown>) => [`${i.pk}\u0000${i.sk}`, i]));
        for (const k of input.RequestItems[table]?.Keys ?? []) {
          const item = found.get(`${k.pk}\u0000${k.sk}`) as Record<string, unknown> | undefined;
          m.rcuFromSizes += rcu(item ? itemSize(item) : 0, consistent);
        }
        break;
      }
      default:
        m.wcuReported += units;
    }
    const op = name.replace(/Command$/, '');
    const bytes = m.bytesWritten - was.b;
    m.calls.push(`${op} ${units}/${m.wcuFromSizes + m.rcuFromSizes - was.w}${bytes ? ` (${bytes} B)` : ''}`);
    return out;
  };
  return {
    take() {
      const used = current;
      current = emptyMeter();
      return used;
    },
  };
}

async function partitionItems(db: Database, tenant: string, runId: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db.doc.send(new QueryCommand({ TableName: db.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) }, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

/** RAGFlow's session row after a turn: its canvas (DSL + whole state) and every message. */
function ragflowRow(canvas: Canvas, messages: unknown[]): number {
  const row = { id: 'x'.repeat(32), dialog_id: 'x'.repeat(32), user_id: '', message: messages, reference: [], dsl: { ...benchDsl(), ...canvas.serialize() } };
  return Buffer.byteLength(JSON.stringify(row));
}

export async function writeCost(db: Database, options: WriteCostOptions): Promise<WriteCostResult> {
  const n = options.turns;
  const marks = [...new Set([2, Math.round(n / 4), Math.round(n / 2), n])].filter((t) => t >= 2 && t <= n);
  heading(
    '2. Write cost vs conversation length',
    `one conversation of ${n} turns with the same output every turn (10-node workflow: queries pause at the form, answers complete), executeTurn on the bench table with ReturnConsumedCapacity; WCU/RCU as reported and as computed from item sizes (whole item on update, +1 KB-unit per changed listing-index entry, reads per 4 KB); "RAGFlow" = the session row RAGFlow rewrites every turn (canvas DSL with its whole state + all messages), from the serialized state of the same conversation; then ${options.keyedTurns} turns with an Idempotency-Key each, ${options.keyedTurns} turns with every quota on (EASEL_QUOTA_*, compared turn by turn with the same turns without), and ${options.keyedTurns} turns run by the queue worker (the bench workflow calls no model, so they write no checkpoint; an async turn with model calls is measured by test/turns/protocol.test.ts).`,
  );
  const config = readConfig({ ...process.env, EASEL_DYNAMODB_ENDPOINT: db.endpoint, EASEL_DYNAMODB_TABLE: db.table });
  // the runtime's own client is the metered one; db.doc reads item sizes unmetered
  const runtime = buildRuntime(config);
  const { doc } = runtime.store;
  const usage = meter(doc, db.doc, db.table);
  const engine: TurnEngine = { ...runtime.engine, store: { ...runtime.store, onCapacity: () => undefined } };
  const tenant = `bench${randomBytes(4).toString('hex')}`;
  const workflowId = `wf${randomBytes(4).toString('hex')}`;
  await createWorkflow({ doc: db.doc, table: db.table }, { tenant, id: workflowId, name: 'bench', dsl: benchDsl() });

  // RAGFlow keeps the whole history in its canvas; the same conversation, in memory
  const ragflow = Canvas.create(benchWorkflow(), { historyLimit: Number.MAX_SAFE_INTEGER });
  const messages: unknown[] = [];
  const costs: TurnCost[] = [];
  let mismatches = 0;
  let runId: string | undefined;
  for (let t = 1; t <= n; t++) {
    usage.take();
    const result = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput: turnInput(t) });
    const m = usage.take();
    runId = result.response.run_id;
    let answer = '';
    for await (const e of ragflow.run(turnInput(t))) if (e.event === 'message') answer += (e.data as { content: string }).content;
    const query = turnInput(t).query;
    if (query) messages.push({ role: 'user', content: query, id: 'x'.repeat(36) });
    messages.push({ role: 'assistant', content: answer, id: 'x'.repeat(36), created_at: 0 });
    if (m.wcuReported !== m.wcuFromSizes || m.rcuReported !== m.rcuFromSizes) {
      if (mismatches++ < 3) console.log(`turn ${t}: reported ${m.wcuReported} WCU ${m.rcuReported} RCU, from sizes ${m.wcuFromSizes} WCU ${m.rcuFromSizes} RCU: ${m.calls.join(', ')}`);
    }
    const { calls, ...figures } = m;
    if (t === 2) console.log(`turn 2, call by call (units reported/from sizes): ${calls.join(', ')}`);
    costs.push({ turn: t, ...figures, ragflowBytes: ragflowRow(ragflow, messages) });
  }

  // the same workflow with an Idempotency-Key on every turn
  const keyed: Omit<Meter, 'calls'>[] = [];
  let keyedRun: string | undefined;
  for (let t = 1; t <= options.keyedTurns; t++) {
    usage.take();
    const result = await executeTurn(engine, {
      // as a client following the protocol sends it: with turn_number, so the key travels in the turn
      tenant, workflowId, principal: 'bench-key', ...(keyedRun ? { runId: keyedRun, turnNumber: t - 1 } : {}), runInput: turnInput(t), idempotencyKey: `bench-${randomBytes(16).toString('hex')}`,
    });
    keyedRun = result.response.run_id;
    if (t > 1) keyed.push(usage.take());
  }
  const plainSteady = costs.slice(1);
  const at = (t: number) => costs[t - 1] as TurnCost;

  // the same length again, each turn queued and run by the worker (lease, checkpoints, commit)
  const queued: Omit<Meter, 'calls'>[] = [];
  let queuedRun: string | undefined;
  for (let t = 1; t <= options.keyedTurns; t++) {
    usage.take();
    const body = JSON.stringify({ tenant, workflow_id: workflowId, ...(queuedRun ? { run_id: queuedRun, turn_number: t - 1 } : {}), run_input: turnInput(t) });
    const outcome = await processMessage({ engine, guard: runtime.guard }, body);
    if (outcome.kind !== 'done') throw new Error(`queued turn ${t}: ${JSON.stringify(outcome)}`);
    queuedRun = outcome.runId;
    if (t > 1) queued.push(usage.take());
  }

  // the same turns with every quota on (limits nobody reaches), sent by an end user, beside the
  // same turns of the first conversation (same inputs, same turn numbers) without quotas
  const quotaSettings = readConfig({
    ...process.env,
    EASEL_QUOTA_TENANT_TURNS_PER_MINUTE: '1000000000',
    EASEL_QUOTA_TENANT_TOKENS_PER_DAY: '1000000000000',
    EASEL_QUOTA_USER_TURNS_PER_MINUTE: '1000000000',
    EASEL_QUOTA_USER_TOKENS_PER_DAY: '1000000000000',
  }).quotas;
  const limited: TurnEngine = { ...engine, ...(quotaSettings ? { quotas: quotaSettings } : {}) };
  const withQuotas: Omit<Meter, 'calls'>[] = [];
  const extra: { wcu: number; rcu: number; trips: number }[] = [];
  let quotaRun: string | undefined;
  let quotaCalls = '';
  for (let t = 1; t <= options.keyedTurns; t++) {
    usage.take();
    const result = await executeTurn(limited, { tenant, workflowId, actor: { kind: 'end_user', id: 'bench-user', key_id: 'bench-key' }, ...(quotaRun ? { runId: quotaRun } : {}), runInput: turnInput(t) });
    quotaRun = result.response.run_id;
    const { calls, ...m } = usage.take();
    if (t === 2) quotaCalls = calls.join(', ');
    if (t === 1) continue;
    withQuotas.push(m);
    const plain = at(t);
    extra.push({
      wcu: Math.max(m.wcuReported, m.wcuFromSizes) - Math.max(plain.wcuReported, plain.wcuFromSizes),
      rcu: Math.max(m.rcuReported, m.rcuFromSizes) - Math.max(plain.rcuReported, plain.rcuFromSizes),
      trips: m.roundTrips - plain.roundTrips,
    });
  }

  // the session's items when it expires: the cleanup consumer deletes all but the head
  const items = await partitionItems(db, tenant, runId as string);
  const cleanupWru = items.filter((i) => i.sk !== 'T#~').reduce((sum, i) => sum + kb(itemSize(i)), 0);
  const cleanupWruPerTurn = cleanupWru / n;
  console.log(`session cleanup: ${items.length - 1} items deleted by the consumer, ${cleanupWru} WRU, ${fmt(cleanupWruPerTurn)} WRU per turn amortized (the head expires by TTL, free)`);

  table(
    ['turn', 'WCU reported', 'WCU from sizes', 'bytes written', 'RCU reported', 'RCU from sizes', 'round trips', 'RAGFlow bytes', 'RAGFlow WCU-equiv.'],
    marks.map((t) => {
      const c = at(t);
      return [t, c.wcuReported, c.wcuFromSizes, c.bytesWritten, c.rcuReported, c.rcuFromSizes, c.roundTrips, c.ragflowBytes, kb(c.ragflowBytes)];
    }),
  );
  const first = at(2);
  const last = at(marks[marks.length - 1] as number);
  const wcuGrowth = last.wcuReported / first.wcuReported;
  const bytesGrowth = last.bytesWritten / first.bytesWritten;
  const ragflowGrowth = last.ragflowBytes / first.ragflowBytes;
  const result: WriteCostResult = {
    checkpoints: marks.map(at),
    growthRatio: Math.max(wcuGrowth, bytesGrowth),
    wcuGrowth,
    bytesGrowth,
    ragflowGrowth,
    meanWcu: mean(costs.map((c) => Math.max(c.wcuReported, c.wcuFromSizes))),
    meanRcu: mean(costs.map((c) => Math.max(c.rcuReported, c.rcuFromSizes))),
    meanRoundTrips: mean(costs.map((c) => c.roundTrips)),
    keyed: {
      meanWcu: mean(keyed.map((c) => Math.max(c.wcuReported, c.wcuFromSizes))),
      meanRcu: mean(keyed.map((c) => Math.max(c.rcuReported, c.rcuFromSizes))),
      meanRoundTrips: mean(keyed.map((c) => c.roundTrips)),
    },
    mismatches,
    cleanupWruPerTurn,
    async: {
      meanWcu: mean(queued.map((c) => Math.max(c.wcuReported, c.wcuFromSizes))),
      meanRcu: mean(queued.map((c) => Math.max(c.rcuReported, c.rcuFromSizes))),
      meanRoundTrips: mean(queued.map((c) => c.roundTrips)),
    },
    quotas: {
      meanWcu: mean(withQuotas.map((c) => Math.max(c.wcuReported, c.wcuFromSizes))),
      meanRcu: mean(withQuotas.map((c) => Math.max(c.rcuReported, c.rcuFromSizes))),
      meanRoundTrips: mean(withQuotas.map((c) => c.roundTrips)),
      extraWcu: mean(extra.map((e) => e.wcu)),
      extraRcu: mean(extra.map((e) => e.rcu)),
      extraRoundTrips: mean(extra.map((e) => e.trips)),
      shards: quotaSettings?.shards ?? DEFAULT_QUOTA_SHARDS,
    },
  };
  console.log(
    `mean per turn over all ${n} turns: ${fmt(result.meanWcu)} WCU, ${fmt(result.meanRcu)} RCU, ${fmt(result.meanRoundTrips)} round trips (continuing turns: ${fmt(mean(plainSteady.map((c) => c.wcuReported)))} WCU); with an Idempotency-Key: ${fmt(result.keyed.meanWcu)} WCU, ${fmt(result.keyed.meanRcu)} RCU, ${fmt(result.keyed.meanRoundTrips)} round trips`,
  );
  console.log(`the same ${options.keyedTurns} turns run by the queue worker (async): ${fmt(result.async.meanWcu)} WCU, ${fmt(result.async.meanRcu)} RCU, ${fmt(result.async.meanRoundTrips)} round trips per continuing turn`);
  console.log(
    `the same ${options.keyedTurns} turns with every quota on (tenant and end user, turns per minute and tokens per day, ${result.quotas.shards} tenant shards): ${fmt(result.quotas.meanWcu)} WCU, ${fmt(result.quotas.meanRcu)} RCU, ${fmt(result.quotas.meanRoundTrips)} round trips per continuing turn; ` +
      `quotas add ${fmt(result.quotas.extraRoundTrips)} round trips (the BatchGetItem beside the session's Query, and two counter updates side by side after the commit: 1 more in sequence), ${fmt(result.quotas.extraWcu)} WRU and ${fmt(result.quotas.extraRcu)} RRU a turn (turn 2, call by call: ${quotaCalls})`,
  );
  console.log(`turns where DynamoDB's report and the size arithmetic differ: ${mismatches} of ${n}`);
  console.log(`turn ${last.turn} / turn 2: WCU x${fmt(wcuGrowth)}, bytes x${fmt(bytesGrowth)}; RAGFlow's way: bytes x${fmt(ragflowGrowth)}`);
  console.log(`target turn ${last.turn} <= 1.1x turn 2: ${verdict(result.growthRatio, '<=', 1.1)}`);
  return result;
}
