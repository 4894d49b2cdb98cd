/**
 * 2. Round trips and write cost per turn. First, by kind of turn through the app
 * (bench/round-trips.ts). Then write cost vs conversation length: one conversation with the same
 * output every turn, through the turn engine (executeTurn, as the HTTP route calls it), every
 * call metered (bench/lib/capacity.ts); beside it, the same conversation stored RAGFlow's way
 * (the whole session row rewritten every turn); and what quotas add to the same turns.
 */
import { randomBytes } from 'node:crypto';
import { Canvas } from '../lib/canvas';
import { readConfig } from '../lib/config';
import { buildRuntime } from '../lib/runtime';
import { createWorkflow } from '../lib/store/workflows';
import { executeTurn, type TurnEngine } from '../lib/turns/execute';
import { DEFAULT_QUOTA_SHARDS } from '../lib/turns/quotas';
import { kb, type Meter, meter } from './lib/capacity';
import type { Database } from './lib/stack';
import { fmt, heading, mean, table, verdict } from './lib/stats';
import { type ProtocolResult, protocolCosts } from './round-trips';
import { benchDsl, benchWorkflow, turnInput } from './workflow';

export interface WriteCostOptions {
  /** Turns of each kind's conversation in the first part. */
  turnsPerKind: number;
  /** Turns of the bench workflow's conversation priced by measurement 6. */
  conversationTurns: number;
  /** The conversation whose write cost must stay flat (turn N vs turn 2). */
  growthTurns: number;
  /** Turns with every quota on, beside the same turns without. */
  quotaTurns: number;
}

/** One checkpoint turn's meter reading, and the same conversation stored RAGFlow's way. */
export interface TurnCost extends Omit<Meter, 'calls'> {
  turn: number;
  ragflowBytes: number;
}

export interface WriteCostResult {
  protocol: ProtocolResult;
  checkpoints: TurnCost[];
  /** Turn N over turn 2, the larger of the WCU and bytes ratios. */
  growthRatio: number;
  wcuGrowth: number;
  bytesGrowth: number;
  ragflowGrowth: number;
  /** Means over every turn of the long conversation (the first included). */
  meanWcu: number;
  meanRcu: number;
  meanRoundTrips: number;
  /**
   * The same turns again with every quota on (tenant and end user, turns and tokens;
   * EASEL_QUOTA_*): their means, and what they add to the same turns without quotas.
   */
  quotas: { meanWcu: number; meanRcu: number; meanRoundTrips: number; extraWcu: number; extraRcu: number; extraRoundTrips: number; shards: number };
  /** Reported and arithmetic figures disagreed on this many turns of the long conversation. */
  mismatches: number;
}

/** RAGFlow's session row after a turn: its canvas (DSL + whole state) and every message. */
function ragflowRow(canvas: Canvas, messages: unknown[]): number {
  const row = { id: 'x'.repeat(32), dialog_id: 'x'.repeat(32), user_id: '', message: messages, reference: [], dsl: { ...benchDsl(), ...canvas.serialize() } };
  return Buffer.byteLength(JSON.stringify(row));
}

export async function writeCost(db: Database, options: WriteCostOptions): Promise<WriteCostResult> {
  const n = options.growthTurns;
  heading(
    '2. Round trips and write cost per turn',
    `by kind of turn: a conversation of ${options.turnsPerKind} turns each (the bench workflow: ${options.conversationTurns}) through the app wired as npm start wires it (lib/local/app.ts, called with app.fetch; async turns run by an in-process queue and the Lambda worker's batch handler), model calls answered by a local OpenAI-compatible server; then one conversation of ${n} turns of the bench workflow (same output every turn) through executeTurn, beside the same conversation stored RAGFlow's way (the session row with the canvas DSL, its whole state and every message, rewritten every turn); then ${options.quotaTurns} turns with every quota on beside the same turns without. Every DynamoDB call with ReturnConsumedCapacity, WRU/RRU as reported and as computed from item sizes (a write on the larger of the item before and after, per KB, + each changed index entry; a transaction twice; reads per 4 KB); round trips = calls sent.`,
  );
  const protocol = await protocolCosts(db, { turnsPerKind: options.turnsPerKind, conversationTurns: options.conversationTurns });
  console.log(`targets: pure turn <= 2 round trips: ${verdict(protocol.roundTripsPure, '<=', 2)}; with a model call <= 3: ${verdict(protocol.roundTripsExternal, '<=', 3)}; an Idempotency-Key adds 0: ${protocol.roundTripsKeyedExtra === 0 ? 'met' : `MISSED (${fmt(protocol.roundTripsKeyedExtra)})`}; async turn with two model calls <= 12 WRU: ${verdict(protocol.asyncTurnWru, '<=', 12)}`);

  const marks = [...new Set([2, Math.round(n / 4), Math.round(n / 2), n])].filter((t) => t >= 2 && t <= n);
  const config = readConfig({ ...process.env, EASEL_DYNAMODB_ENDPOINT: db.endpoint, EASEL_DYNAMODB_TABLE: db.table });
  // the runtime's own client is the metered one; db.doc reads item sizes unmetered
  const runtime = buildRuntime(config);
  const usage = meter(runtime.store.doc, db.doc, db.table);
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
  const at = (t: number) => costs[t - 1] as TurnCost;

  // the same turns with every quota on (limits nobody reaches), sent by an end user, beside the
  // same turns of the conversation above (same inputs, same turn numbers) without quotas
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
  for (let t = 1; t <= Math.min(options.quotaTurns, n); t++) {
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
  runtime.dynamo.destroy();

  console.log(`\n### Write cost vs conversation length (${n} turns of the bench workflow through executeTurn)`);
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
    protocol,
    checkpoints: marks.map(at),
    growthRatio: Math.max(wcuGrowth, bytesGrowth),
    wcuGrowth,
    bytesGrowth,
    ragflowGrowth,
    meanWcu: mean(costs.map((c) => Math.max(c.wcuReported, c.wcuFromSizes))),
    meanRcu: mean(costs.map((c) => Math.max(c.rcuReported, c.rcuFromSizes))),
    meanRoundTrips: mean(costs.map((c) => c.roundTrips)),
    mismatches,
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
  console.log(`mean per turn over all ${n} turns: ${fmt(result.meanWcu)} WCU, ${fmt(result.meanRcu)} RCU, ${fmt(result.meanRoundTrips)} round trips; turns where DynamoDB's report and the size arithmetic differ: ${mismatches} of ${n}`);
  console.log(`turn ${last.turn} / turn 2: WCU x${fmt(wcuGrowth)}, bytes x${fmt(bytesGrowth)}; RAGFlow's way: bytes x${fmt(ragflowGrowth)}`);
  console.log(
    `the same ${withQuotas.length + 1} turns with every quota on (tenant and end user, turns per minute and tokens per day, ${result.quotas.shards} tenant shards): ${fmt(result.quotas.meanWcu)} WCU, ${fmt(result.quotas.meanRcu)} RCU, ${fmt(result.quotas.meanRoundTrips)} round trips per continuing turn; ` +
      `quotas add ${fmt(result.quotas.extraRoundTrips)} round trips (the BatchGetItem beside the session's Query, and two counter updates side by side after the commit: 1 more in sequence), ${fmt(result.quotas.extraWcu)} WRU and ${fmt(result.quotas.extraRcu)} RRU a turn (turn 2, call by call: ${quotaCalls})`,
  );
  console.log(`target turn ${last.turn} <= 1.1x turn 2: ${verdict(result.growthRatio, '<=', 1.1)}`);
  return result;
}
