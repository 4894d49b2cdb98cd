/**
 * 2, first part: DynamoDB round trips and capacity per turn, by kind of turn, through the app
 * wired as `npm start` wires it (lib/local/app.ts: the HTTP routes on a runtime, async turns run
 * in process by the same batch handler as the Lambda worker), called with `app.fetch` so no
 * socket is in the way. Every DynamoDB call goes through the capacity meter (bench/lib/capacity.ts):
 * ReturnConsumedCapacity as DynamoDB reports it, cross-checked by arithmetic from item sizes.
 * Model calls go to a local OpenAI-compatible server (bench/lib/model-server.ts).
 */
import { randomBytes } from 'node:crypto';
import type { RunInput } from '../lib/canvas';
import { readConfig } from '../lib/config';
import { createApp } from '../lib/http/app';
import { appDeps } from '../lib/http/deps';
import { createInProcessQueue } from '../lib/local/in-process-queue';
import { buildRuntime, queueDeps } from '../lib/runtime';
import { itemSize } from '../lib/store/blobs';
import { hashSecret, putApiKey } from '../lib/store/api-keys';
import { SESSION_HEAD_SK } from '../lib/store/item-keys';
import { processBatch } from '../lib/turns/queue';
import { createWorkflow } from '../lib/store/workflows';
import { kb, type Meter, meter, partitionItems } from './lib/capacity';
import { startModelServer } from './lib/model-server';
import type { Database } from './lib/stack';
import { fmt, mean, median, table } from './lib/stats';
import { benchDsl, modelDsl, pureDsl, turnInput } from './workflow';

export interface ProtocolOptions {
  /** Turns of each kind's conversation (the first, which creates the run, is not counted). */
  turnsPerKind: number;
  /** Turns of the bench workflow's conversation whose mean goes into the bill (measurement 6). */
  conversationTurns: number;
}

/** One kind of turn: medians over the continuing turns of its conversation. */
export interface TurnKindCost {
  kind: string;
  turns: number;
  roundTrips: number;
  /** The larger of the reported and the size-computed write units. */
  wru: number;
  wruReported: number;
  wruFromSizes: number;
  rru: number;
  /** A typical turn's calls, `operation reported/from sizes (bytes)`. */
  calls: string;
  /** Turns where the report and the arithmetic differ. */
  mismatches: number;
}

/** A whole conversation's means per turn, the first turn and the session's cleanup included. */
export interface ConversationCost {
  turns: number;
  wru: number;
  rru: number;
  roundTrips: number;
  /** The cleanup consumer's deletes when the session expires, divided by its turns. */
  cleanupWruPerTurn: number;
  /** wru + cleanupWruPerTurn. */
  wruWithCleanup: number;
}

export interface ProtocolResult {
  kinds: TurnKindCost[];
  roundTripsPure: number;
  roundTripsExternal: number;
  /** Round trips an Idempotency-Key adds to the same turn (the larger over pure and model turns). */
  roundTripsKeyedExtra: number;
  keyedExtraWru: number;
  /** An async turn with two model calls, claim to commit, the worker included. */
  asyncTurnWru: number;
  conversation: ConversationCost;
  keyedConversation: ConversationCost;
}

const units = (m: Meter) => ({ wru: Math.max(m.wcuReported, m.wcuFromSizes), rru: Math.max(m.rcuReported, m.rcuFromSizes) });

export async function protocolCosts(db: Database, options: ProtocolOptions): Promise<ProtocolResult> {
  const model = await startModelServer();
  const config = readConfig({
    ...process.env,
    EASEL_DYNAMODB_ENDPOINT: db.endpoint,
    EASEL_DYNAMODB_TABLE: db.table,
    EASEL_LLM_BASE_URL: model.url,
    EASEL_LLM_DEFAULT_MODEL: 'openai:bench',
    // the key's lookup is cached per process; the longest cache keeps it out of the turns measured
    EASEL_AUTH_CACHE_MS: '60000',
  });
  // lib/local/app.ts's wiring, without its console lines
  const runtime = buildRuntime(config);
  const queue = createInProcessQueue((records) => processBatch(queueDeps(runtime, { requeue: (message) => queue.enqueue(message), onAbort: 'release' }), records));
  const app = createApp({ ...appDeps(runtime), enqueue: queue.enqueue });
  const { store } = runtime;
  // asks DynamoDB for consumed capacity on every call; the meter reads it off the responses
  store.onCapacity = () => undefined;
  const usage = meter(store.doc, db.doc, db.table);
  const tenant = `bench${randomBytes(4).toString('hex')}`;
  const secret = `bench-${randomBytes(16).toString('hex')}`;
  await putApiKey({ doc: db.doc, table: db.table }, { tenant, id: randomBytes(8).toString('hex'), name: 'bench', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
  const workflow = async (dsl: unknown) => {
    const id = `wf${randomBytes(4).toString('hex')}`;
    await createWorkflow({ doc: db.doc, table: db.table }, { tenant, id, name: id, dsl });
    return id;
  };

  /** A conversation through the app; the meter's reading of each turn, in order. */
  const converse = async (workflowId: string, turns: number, how: { keyed?: boolean; async?: boolean; input?: (n: number) => RunInput } = {}) => {
    const metered: Meter[] = [];
    let runId: string | undefined;
    for (let n = 1; n <= turns; n++) {
      usage.take();
      const res = await app.fetch(new Request(`http://bench.local/workflows/v1/workflows/${workflowId}/execute`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${secret}`,
          'content-type': 'application/json',
          ...(how.keyed ? { 'idempotency-key': randomBytes(16).toString('hex') } : {}),
          ...(how.async ? { prefer: 'respond-async' } : {}),
        },
        // turn_number as a client following the protocol sends it: a key then travels in the turn
        body: JSON.stringify({ ...(runId ? { run_id: runId, turn_number: n - 1 } : {}), run_input: how.input?.(n) ?? { query: `question ${n}` } }),
      }));
      const text = await res.text();
      if (res.status !== (how.async ? 202 : 200)) throw new Error(`turn ${n} answered ${res.status}: ${text.slice(0, 300)}`);
      // an async turn is done when the in-process worker has committed it
      if (how.async) await queue.idle();
      runId = (JSON.parse(text) as { run_id: string }).run_id;
      metered.push(usage.take());
    }
    return { metered, runId: runId as string };
  };

  const kinds: TurnKindCost[] = [];
  const kind = (name: string, metered: Meter[]): TurnKindCost => {
    const steady = metered.slice(1);
    const typical = steady[Math.floor(steady.length / 2)] as Meter;
    const row: TurnKindCost = {
      kind: name,
      turns: steady.length,
      roundTrips: median(steady.map((m) => m.roundTrips)),
      wru: median(steady.map((m) => units(m).wru)),
      wruReported: median(steady.map((m) => m.wcuReported)),
      wruFromSizes: median(steady.map((m) => m.wcuFromSizes)),
      rru: median(steady.map((m) => units(m).rru)),
      calls: typical.calls.join(', '),
      mismatches: steady.filter((m) => m.wcuReported !== m.wcuFromSizes || m.rcuReported !== m.rcuFromSizes).length,
    };
    kinds.push(row);
    return row;
  };
  const conversationCost = async (metered: Meter[], runId: string): Promise<ConversationCost> => {
    // the head goes by TTL (free); the cleanup consumer deletes every other item, 1 WRU per KB of each
    const items = await partitionItems(db, tenant, runId);
    const cleanupWru = items.filter((i) => i.sk !== SESSION_HEAD_SK).reduce((sum, i) => sum + kb(itemSize(i)), 0);
    const wru = mean(metered.map((m) => units(m).wru));
    const cleanupWruPerTurn = cleanupWru / metered.length;
    return { turns: metered.length, wru, rru: mean(metered.map((m) => units(m).rru)), roundTrips: mean(metered.map((m) => m.roundTrips)), cleanupWruPerTurn, wruWithCleanup: wru + cleanupWruPerTurn };
  };

  try {
    const pureId = await workflow(pureDsl());
    const externalId = await workflow(modelDsl(1));
    const asyncId = await workflow(modelDsl(2));
    const benchId = await workflow(benchDsl());
    const t = options.turnsPerKind;
    const pure = kind('pure (Begin -> Message)', (await converse(pureId, t)).metered);
    const pureKeyed = kind('pure, with an Idempotency-Key', (await converse(pureId, t, { keyed: true })).metered);
    const external = kind('with a model call (Begin -> LLM -> Message)', (await converse(externalId, t)).metered);
    const externalKeyed = kind('with a model call and an Idempotency-Key', (await converse(externalId, t, { keyed: true })).metered);
    const asyncTurn = kind('async, two model calls (Prefer: respond-async), the worker included', (await converse(asyncId, t, { async: true })).metered);
    const plain = await converse(benchId, options.conversationTurns, { input: turnInput });
    const keyed = await converse(benchId, options.conversationTurns, { input: turnInput, keyed: true });
    kind('bench workflow (status changes every turn)', plain.metered);
    kind('bench workflow, with an Idempotency-Key', keyed.metered);
    const result: ProtocolResult = {
      kinds,
      roundTripsPure: pure.roundTrips,
      roundTripsExternal: external.roundTrips,
      roundTripsKeyedExtra: Math.max(pureKeyed.roundTrips - pure.roundTrips, externalKeyed.roundTrips - external.roundTrips),
      keyedExtraWru: Math.max(pureKeyed.wru - pure.wru, externalKeyed.wru - external.wru),
      asyncTurnWru: asyncTurn.wru,
      conversation: await conversationCost(plain.metered, plain.runId),
      keyedConversation: await conversationCost(keyed.metered, keyed.runId),
    };
    console.log(`\n### Round trips and capacity per turn, by kind (medians over turns 2-${t} of a conversation each; the bench workflow's over turns 2-${options.conversationTurns}); model calls answered: ${model.calls()}`);
    table(
      ['turn', 'turns', 'round trips', 'WRU', 'WRU reported', 'WRU from sizes', 'RRU', 'differ', 'a typical turn, call by call (reported/from sizes)'],
      kinds.map((k) => [k.kind, k.turns, k.roundTrips, k.wru, k.wruReported, k.wruFromSizes, k.rru, k.mismatches, k.calls]),
    );
    const c = result.conversation;
    const ck = result.keyedConversation;
    console.log(`bench workflow, ${c.turns}-turn conversation, means per turn with the first: ${fmt(c.roundTrips)} round trips, ${fmt(c.wru)} WRU + ${fmt(c.cleanupWruPerTurn)} WRU of the session cleanup's deletes (the head expires by TTL, free) = ${fmt(c.wruWithCleanup)} WRU, ${fmt(c.rru)} RRU; with an Idempotency-Key on every turn: ${fmt(ck.roundTrips)} round trips, ${fmt(ck.wruWithCleanup)} WRU with the cleanup, ${fmt(ck.rru)} RRU`);
    console.log(`an Idempotency-Key adds ${fmt(result.roundTripsKeyedExtra)} round trips and ${fmt(result.keyedExtraWru)} WRU to the same turn (sent with turn_number)`);
    return result;
  } finally {
    queue.close(async () => undefined);
    runtime.dynamo.destroy();
    await model.close();
  }
}
