/**
 * Quotas in the turn layer, on DynamoDB Local: turns per minute and model tokens per day, per
 * tenant and per end user (or execute key), replays, async turns, and what quotas cost a turn.
 * Every engine runs on an injected clock fixed inside one minute, so no window ends mid-test.
 */
import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import type { StoreContext } from '../../lib/store/dynamo';
import { keys } from '../../lib/store/item-keys';
import { getTurn } from '../../lib/store/sessions';
import { createDynamoClients } from '../../lib/store/setup';
import type { Actor } from '../../lib/turns/actors';
import { claimNextTurn, createRun, executeTurn, type TurnEngine, type TurnRequest } from '../../lib/turns/execute';
import { processMessage } from '../../lib/turns/queue';
import { type QuotaLimits, RateLimitedError } from '../../lib/turns/quotas';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';
import { fixedMinute } from './clock';

let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = () => ({ kind: 'text', text: 'noted' });
});
afterAll(async () => {
  await model.close();
});

/** Begin (conversational) -> Message: a turn that reaches nothing outside the run. */
const PURE = {
  components: {
    begin: { obj: { component_name: 'Begin', params: { mode: 'conversational', prologue: 'Hi' } }, downstream: ['Message:Echo'], upstream: [] },
    'Message:Echo': { obj: { component_name: 'Message', params: { content: ['You said: {sys.query}'] } }, downstream: [], upstream: ['begin'] },
  },
};

function quotaEngine(limits: QuotaLimits, options: { at?: () => number; store?: StoreContext; shards?: number } = {}): TurnEngine {
  const start = fixedMinute();
  const at = options.at ?? (() => start);
  const base = testEngine({ openaiUrl: model.url, ...(options.store ? { store: options.store } : {}) });
  return { ...base, store: { ...base.store, now: at }, clock: at, quotas: { limits, ...(options.shards ? { shards: options.shards } : {}) } };
}

const user = (id: string): Actor => ({ kind: 'end_user', id, key_id: 'embed-key' });

/** Runs `n` turns of one conversation; returns the run id. */
async function converse(engine: TurnEngine, base: Omit<TurnRequest, 'runInput'>, n: number, runId?: string): Promise<string | undefined> {
  let id = runId;
  for (let i = 0; i < n; i++) {
    const r = await executeTurn(engine, { ...base, ...(id ? { runId: id } : {}), runInput: { query: `q${i}` } });
    id = r.response.run_id;
  }
  return id;
}

async function refusal(promise: Promise<unknown>): Promise<RateLimitedError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(RateLimitedError);
  return error as RateLimitedError;
}

/** Every quota counter item of a tenant's scope. */
async function counters(store: StoreContext, tenant: string, scope: string): Promise<Record<string, unknown>[]> {
  const { Items = [] } = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.quotaUsage(tenant, scope) } }));
  return Items;
}

describe('turns per minute', () => {
  it('with a limit of 60 turns a minute per end user, the 61st is refused; another end user of the same key is not', async () => {
    const engine = quotaEngine({ userTurnsPerMinute: 60 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    // two runs of one end user: the limit is the user's, not the run's
    const runId = await converse(engine, { tenant, workflowId, actor: user('ada') }, 30);
    await converse(engine, { tenant, workflowId, actor: user('ada') }, 30);
    const refused = await refusal(executeTurn(engine, { tenant, workflowId, actor: user('ada'), runId, runInput: { query: 'one more' } }));
    expect(refused.code).toBe('rate_limited');
    expect(refused.limit).toBe('user_turns_per_minute');
    expect(refused.retryAfter).toBe(55);
    expect(refused.message).toMatch(/60 turns a minute for this end user/);
    // the refused turn left the run where it was
    const again = await executeTurn(engine, { tenant, workflowId, actor: user('grace'), runInput: { query: 'hello' } });
    expect(again.response.status).toBe('completed');
    // an execute key without an end user is a subject of its own
    await converse(engine, { tenant, workflowId, actor: { kind: 'execute_key', id: 'k1' } }, 3);
    expect((await counters(engine.store, tenant, 'user:ada'))[0]).toMatchObject({ n: 60 });
  });

  it('a new minute opens a new window', async () => {
    let at = fixedMinute();
    const engine = quotaEngine({ userTurnsPerMinute: 2 }, { at: () => at });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    const runId = await converse(engine, { tenant, workflowId, actor: user('ada') }, 2);
    await refusal(executeTurn(engine, { tenant, workflowId, actor: user('ada'), runId, runInput: { query: 'third' } }));
    at += 60_000;
    await converse(engine, { tenant, workflowId, actor: user('ada') }, 2, runId);
    expect((await counters(engine.store, tenant, 'user:ada'))[0]).toMatchObject({ n: 2, m: Math.floor(at / 60_000) });
  });

  it('counts a tenant over shards written at random, summed when checking; turns nobody sent count there', async () => {
    const engine = quotaEngine({ tenantTurnsPerMinute: 12, userTurnsPerMinute: 1000 }, { shards: 4 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    await converse(engine, { tenant, workflowId }, 6);
    await converse(engine, { tenant, workflowId, actor: user('ada') }, 6);
    const refused = await refusal(executeTurn(engine, { tenant, workflowId, actor: user('grace'), runInput: { query: 'x' } }));
    expect(refused.limit).toBe('tenant_turns_per_minute');
    const shards = await Promise.all([0, 1, 2, 3].map((i) => counters(engine.store, tenant, `~${i}`)));
    const perShard = shards.map((items) => Number(items[0]?.n ?? 0));
    console.log(`12 turns over 4 shards: ${perShard.join(', ')}`);
    expect(perShard.reduce((a, b) => a + b, 0)).toBe(12);
    expect(perShard.filter((n) => n > 0).length).toBeGreaterThan(1);
    // the turns sent without an actor were the tenant's only
    expect((await counters(engine.store, tenant, 'user:ada'))[0]).toMatchObject({ n: 6 });
  });

  it('never refuses a stop, and a per-tenant override replaces the default', async () => {
    const engine: TurnEngine = { ...quotaEngine({ userTurnsPerMinute: 1 }) };
    const tenant = newTenant();
    engine.quotas = { limits: { userTurnsPerMinute: 1 }, tenants: { [tenant]: { userTurnsPerMinute: 3 } } };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = await converse(engine, { tenant, workflowId, actor: user('ada') }, 3);
    await refusal(executeTurn(engine, { tenant, workflowId, actor: user('ada'), runId, runInput: { query: 'x' } }));
    const stopped = await executeTurn(engine, { tenant, workflowId, actor: user('ada'), runId, command: 'stop' });
    expect(stopped.response.status).toBe('cancelled');
  });
});

describe('model tokens per day', () => {
  it('the turn that crosses the budget completes with its tokens counted; the next is refused until midnight UTC', async () => {
    const engine = quotaEngine({ userTokensPerDay: 10, tenantTokensPerDay: 1_000_000 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const first = await executeTurn(engine, { tenant, workflowId, actor: user('ada'), runInput: { query: 'hello' } });
    expect(first.response.status).toBe('completed');
    const spent = first.response.usage.total_tokens;
    expect(spent).toBeGreaterThan(10);
    // the tokens counted are the sum of the turn's model call records' usage
    const record = await getTurn(engine.store, tenant, first.response.run_id, 1);
    const recorded = (record?.calls.records as { kind: string; result?: { usage?: { total_tokens: number } } }[])
      .filter((c) => c.kind === 'model').reduce((n, c) => n + (c.result?.usage?.total_tokens ?? 0), 0);
    expect(recorded).toBe(spent);
    expect((await counters(engine.store, tenant, 'user:ada'))[0]).toMatchObject({ tok: spent, n: 1 });
    const calls = model.requests.length;
    const refused = await refusal(executeTurn(engine, { tenant, workflowId, actor: user('ada'), runId: first.response.run_id, runInput: { query: 'again' } }));
    expect(refused.limit).toBe('user_tokens_per_day');
    const at = engine.clock?.() as number;
    expect(refused.retryAfter).toBe(Math.ceil((Math.ceil(at / 86_400_000) * 86_400_000 - at) / 1000));
    expect(refused.message).toMatch(/10 model tokens a day for this end user is spent/);
    // refused before any model call
    expect(model.requests.length).toBe(calls);
    // another end user of the same key goes on
    const other = await executeTurn(engine, { tenant, workflowId, actor: user('grace'), runInput: { query: 'hello' } });
    expect(other.response.status).toBe('completed');
    const tenantTokens = (await Promise.all([0, 1, 2, 3].map((i) => counters(engine.store, tenant, `~${i}`)))).flat().reduce((n, i) => n + Number(i.tok ?? 0), 0);
    expect(tenantTokens).toBe(spent + other.response.usage.total_tokens);
  });

  it('an async turn is judged when accepted; the worker adds its tokens after the commit', async () => {
    const engine = quotaEngine({ userTokensPerDay: 10 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const request: TurnRequest = { tenant, workflowId, actor: user('ada'), runInput: { query: 'hello' } };
    const begun = await claimNextTurn(engine, request, { async: true, waitForSameKey: false });
    if (!('claim' in begun)) throw new Error('expected a claim');
    // nothing counted at acceptance
    expect(await counters(engine.store, tenant, 'user:ada')).toEqual([]);
    const message = {
      tenant, workflow_id: workflowId, run_id: begun.prepared.head.id, turn_number: 0, run_input: { query: 'hello' },
      actor: request.actor, claim: { token: begun.claim.token, turn: begun.claim.turn },
    };
    const outcome = await processMessage({ engine, guard: new SsrfGuard() }, JSON.stringify(message));
    expect(outcome).toMatchObject({ kind: 'done', status: 'completed' });
    const counted = (await counters(engine.store, tenant, 'user:ada'))[0];
    expect(Number(counted?.tok)).toBeGreaterThan(10);
    // the next async turn is refused at acceptance: no claim, no 202
    await refusal(claimNextTurn(engine, { ...request, runId: begun.prepared.head.id, turnNumber: 1 }, { async: true, waitForSameKey: false }));
  });
});

describe('replays', () => {
  it('a replayed turn is answered even when the budget is spent, and counts nothing again', async () => {
    const engine = quotaEngine({ userTurnsPerMinute: 2 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    const firstKey = randomBytes(16).toString('hex');
    const secondKey = randomBytes(16).toString('hex');
    const base = { tenant, workflowId, principal: 'embed-key', actor: user('ada') };
    const one = await executeTurn(engine, { ...base, idempotencyKey: firstKey, runInput: { query: 'a' } });
    const two = await executeTurn(engine, { ...base, runId: one.response.run_id, turnNumber: 1, idempotencyKey: secondKey, runInput: { query: 'b' } });
    const replayOne = await executeTurn(engine, { ...base, idempotencyKey: firstKey, runInput: { query: 'a' } });
    const replayTwo = await executeTurn(engine, { ...base, runId: one.response.run_id, turnNumber: 1, idempotencyKey: secondKey, runInput: { query: 'b' } });
    expect(replayOne).toMatchObject({ replayed: true, body: one.body });
    expect(replayTwo).toMatchObject({ replayed: true, body: two.body });
    expect((await counters(engine.store, tenant, 'user:ada'))[0]).toMatchObject({ n: 2 });
    await refusal(executeTurn(engine, { ...base, runId: one.response.run_id, turnNumber: 2, runInput: { query: 'c' } }));
  });
});

describe('run starts', () => {
  it('an execute key alone is limited per client address and per key; end users and admin keys are not', async () => {
    const engine = quotaEngine({ runsPerKeyPerMinute: 3, runsPerAddressPerMinute: 2 });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    const key: Actor = { kind: 'execute_key', id: 'embed' };
    const start = (clientAddress: string, actor: Actor = key) => executeTurn(engine, { tenant, workflowId, actor, clientAddress, runInput: { query: 'hi' } });
    const first = await start('203.0.113.7');
    await start('203.0.113.7');
    expect((await refusal(start('203.0.113.7'))).limit).toBe('runs_per_address_per_minute');
    // the same address spelled inside IPv6 is the same address
    expect((await refusal(start('::ffff:203.0.113.7'))).limit).toBe('runs_per_address_per_minute');
    await start('2001:db8::1');
    // a session created without a turn (RAGFlow's create_session) is a run start too; one /64 is one address
    const refused = await refusal(createRun(engine, { tenant, workflowId, actor: key, clientAddress: '2001:db8::ffff' }));
    expect(refused.limit).toBe('runs_per_key_per_minute');
    expect(refused.message).toMatch(/3 runs a minute/);
    expect(refused.retryAfter).toBe(55);
    // the runs it has go on; end users and admin keys start runs freely
    const next = await executeTurn(engine, { tenant, workflowId, actor: key, clientAddress: '203.0.113.7', runId: first.response.run_id, turnNumber: 1, runInput: { query: 'more' } });
    expect(next.response.turn_number).toBe(2);
    for (let i = 0; i < 4; i++) {
      await start('203.0.113.7', user(`visitor-${i}`));
      await start('203.0.113.7', { kind: 'admin_key', id: 'ops' });
    }
  });
});

/** A store whose client counts every request it sends, and the units DynamoDB reports. */
function countingStore(): { store: StoreContext; take(): { trips: number; wru: number; rru: number; ops: string[] } } {
  const { endpoint, tableName } = testTable();
  const { doc } = createDynamoClients({ endpoint });
  let trips = 0;
  let wru = 0;
  let rru = 0;
  let ops: string[] = [];
  doc.middlewareStack.add((next, context) => async (args) => {
    trips++;
    ops.push(String(context.commandName).replace(/Command$/, ''));
    return next(args);
  }, { step: 'initialize', name: 'countRoundTrips' });
  return {
    store: { doc, table: tableName, onCapacity: (_op, units) => void ((wru += units.write), (rru += units.read)) },
    take() {
      const out = { trips, wru, rru, ops };
      trips = 0;
      wru = 0;
      rru = 0;
      ops = [];
      return out;
    },
  };
}

describe('what quotas cost a turn', () => {
  it('off: no counter is read or written; on: one BatchGetItem and two 1-WRU updates a turn', async () => {
    const meter = countingStore();
    const tenant = newTenant();
    const limits: QuotaLimits = { tenantTurnsPerMinute: 10_000, tenantTokensPerDay: 10_000_000, userTurnsPerMinute: 1000, userTokensPerDay: 1_000_000 };
    const on = quotaEngine(limits, { store: meter.store });
    // quotas configured, but only for another tenant: this one's turns see none
    const elsewhere: TurnEngine = { ...on, quotas: { limits: {}, tenants: { 'another-tenant': limits } } };
    const off: TurnEngine = { ...on, quotas: undefined };
    const pure = await newWorkflow(on, tenant, PURE);
    const external = await newWorkflow(on, tenant, fixture('llm-stream'));
    const measure = async (engine: TurnEngine, workflowId: string) => {
      let runId: string | undefined;
      let last = { trips: 0, wru: 0, rru: 0, ops: [] as string[] };
      // turn 1 warms the compiled-version cache; turn 4 is measured (the listing is fresh)
      for (let turn = 1; turn <= 4; turn++) {
        meter.take();
        const r = await executeTurn(engine, { tenant, workflowId, actor: user('ada'), ...(runId ? { runId, turnNumber: turn - 1 } : {}), runInput: { query: `q${turn}` } });
        runId = r.response.run_id;
        last = meter.take();
      }
      return last;
    };
    const rows: string[] = [];
    const figures: Record<string, { trips: number; wru: number; rru: number }> = {};
    for (const [label, engine] of [['off', off], ['configured for another tenant', elsewhere], ['on', on]] as const) {
      for (const [kind, workflowId] of [['pure', pure], ['model', external]] as const) {
        const m = await measure(engine, workflowId);
        figures[`${label}/${kind}`] = m;
        rows.push(`quotas ${label}, ${kind} turn: ${m.trips} round trips (${m.ops.join(', ')}), ${m.wru} WRU, ${m.rru} RRU`);
      }
    }
    for (const row of rows) console.log(row);
    const f = (k: string) => figures[k] as { trips: number; wru: number; rru: number };
    for (const kind of ['pure', 'model']) {
      expect(f(`configured for another tenant/${kind}`)).toEqual(f(`off/${kind}`));
      expect(f(`on/${kind}`).trips - f(`off/${kind}`).trips).toBe(3);
      expect(f(`on/${kind}`).wru - f(`off/${kind}`).wru).toBe(2);
    }
  });
});
