/**
 * The turn protocol at its limit: round trips per kind of turn (counted by the SDK's own
 * middleware, every HTTP request it sends), idempotency keys carried by the items a turn writes
 * anyway, and the races that the single slot per turn must decide.
 */
import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../lib/store/item-keys';
import { CLAIM_TTL_GRACE_SECONDS } from '../../lib/store/turn-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoClients } from '../../lib/store/setup';
import { itemSize } from '../../lib/store/blobs';
import type { StoreContext } from '../../lib/store/dynamo';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { claimNextTurn, executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { runAsyncTurn } from '../../lib/turns/async-turn';
import { processMessage } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `about ${body.messages.at(-1)?.content}` });
});
afterAll(async () => {
  await model.close();
});

/** A store whose client counts every request it sends, and the write units DynamoDB reports. */
function countingStore(): { store: StoreContext; take(): { trips: number; wru: number; ops: string[] } } {
  const { endpoint, tableName } = testTable();
  const { doc } = createDynamoClients({ endpoint });
  let trips = 0;
  let wru = 0;
  let ops: string[] = [];
  doc.middlewareStack.add((next, context) => async (args) => {
    trips++;
    ops.push(String(context.commandName).replace(/Command$/, ''));
    return next(args);
  }, { step: 'initialize', name: 'countRoundTrips' });
  return {
    store: { doc, table: tableName, onCapacity: (_op, units) => void (wru += units.write) },
    take() {
      const out = { trips, wru, ops };
      trips = 0;
      wru = 0;
      ops = [];
      return out;
    },
  };
}

/** Begin (conversational) -> Message: a turn that reaches nothing outside the run. */
const PURE = {
  components: {
    begin: { obj: { component_name: 'Begin', params: { mode: 'conversational', prologue: 'Hi' } }, downstream: ['Message:Echo'], upstream: [] },
    'Message:Echo': { obj: { component_name: 'Message', params: { content: ['You said: {sys.query}'] } }, downstream: [], upstream: ['begin'] },
  },
};

describe('round trips and write units per turn', () => {
  it('a pure turn is one read and one write; a model call adds the claim; a key adds nothing', async () => {
    const meter = countingStore();
    const engine: TurnEngine = { ...testEngine({ openaiUrl: model.url, store: meter.store }) };
    const tenant = newTenant();
    const pure = await newWorkflow(engine, tenant, PURE);
    const external = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const rows: string[] = [];
    const measure = async (label: string, workflowId: string, keyed: boolean) => {
      let runId: string | undefined;
      let last = { trips: 0, wru: 0, ops: [] as string[] };
      // turn 1 warms the compiled-version cache; turns 2-4 are measured (the listing is fresh)
      for (let turn = 1; turn <= 4; turn++) {
        meter.take();
        const r = await executeTurn(engine, {
          tenant,
          workflowId,
          principal: 'key-a',
          ...(runId ? { runId, turnNumber: turn - 1 } : {}),
          runInput: { query: `q${turn}` },
          ...(keyed ? { idempotencyKey: randomBytes(16).toString('hex') } : {}),
        });
        runId = r.response.run_id;
        last = meter.take();
      }
      rows.push(`${label}: ${last.trips} round trips (${last.ops.join(', ')}), ${last.wru} WRU reported`);
      return last;
    };
    const plain = await measure('pure turn', pure, false);
    const keyedPure = await measure('pure turn with Idempotency-Key', pure, true);
    const model1 = await measure('turn with a model call', external, false);
    const keyedModel = await measure('turn with a model call and Idempotency-Key', external, true);
    for (const row of rows) console.log(row);
    expect(plain.trips).toBeLessThanOrEqual(2);
    expect(model1.trips).toBeLessThanOrEqual(3);
    expect(keyedPure.trips - plain.trips).toBe(0);
    expect(keyedModel.trips - model1.trips).toBe(0);
    expect(keyedModel.wru).toBe(model1.wru);
  });

  it('an async turn with two model calls writes at most 12 WRU, claim to commit', async () => {
    const meter = countingStore();
    const engine = testEngine({ openaiUrl: model.url, store: meter.store });
    const tenant = newTenant();
    const llm = (next: string, up: string) => ({ obj: { component_name: 'LLM', params: { llm_id: 'w@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: '{sys.query}' }] } }, downstream: [next], upstream: [up] });
    const workflowId = await newWorkflow(engine, tenant, {
      components: {
        begin: { obj: { component_name: 'Begin', params: { mode: 'conversational' } }, downstream: ['LLM:A'], upstream: [] },
        'LLM:A': llm('LLM:B', 'begin'),
        'LLM:B': llm('Message:Out', 'LLM:A'),
        'Message:Out': { obj: { component_name: 'Message', params: { content: ['{LLM:B@content}'] } }, downstream: [], upstream: ['LLM:B'] },
      },
    });
    let runId: string | undefined;
    const per: number[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      meter.take();
      const body = JSON.stringify({ tenant, workflow_id: workflowId, ...(runId ? { run_id: runId, turn_number: turn - 1 } : {}), run_input: { query: `q${turn}` } });
      const outcome = await processMessage({ engine, guard: new SsrfGuard() }, body);
      if (outcome.kind !== 'done') throw new Error(JSON.stringify(outcome));
      runId = outcome.runId;
      const used = meter.take();
      per.push(used.wru);
      console.log(`async turn ${turn} with two model calls: ${used.wru} WRU reported, ${used.trips} round trips (${used.ops.join(', ')})`);
    }
    for (const wru of per.slice(1)) expect(wru).toBeLessThanOrEqual(12);
  });
});

describe('idempotency keys in the items a turn writes', () => {
  it('100 concurrent first turns with one key from one principal make one run', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const key = randomBytes(16).toString('hex');
    const results = await Promise.allSettled(Array.from({ length: 100 }, () =>
      executeTurn(engine, { tenant, workflowId, principal: 'key-a', idempotencyKey: key, runInput: { query: 'story' } })));
    const ok = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
    console.log(`100 first turns, one key: ${ok.length} answered, ${failed.length} refused (${[...new Set(failed)].join('; ')})`);
    expect(new Set(ok.map((r) => r.response.run_id)).size).toBe(1);
    expect(new Set(ok.map((r) => r.body)).size).toBe(1);
    // whoever was refused was refused as "in progress" (409), never with another run
    for (const reason of failed) expect(reason).toMatch(/in progress/);
    expect(ok.length).toBeGreaterThan(0);
  });

  it('the same key from two principals makes two runs, neither seeing the other’s answer', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const key = randomBytes(16).toString('hex');
    const a = await executeTurn(engine, { tenant, workflowId, principal: 'key-1/user-a', idempotencyKey: key, runInput: { query: 'from a' } });
    const b = await executeTurn(engine, { tenant, workflowId, principal: 'key-1/user-b', idempotencyKey: key, runInput: { query: 'from b' } });
    expect(a.response.run_id).not.toBe(b.response.run_id);
    expect(b.replayed).toBe(false);
    expect(b.body).not.toContain(a.response.run_id);
    // each one's retry is its own answer
    const againA = await executeTurn(engine, { tenant, workflowId, principal: 'key-1/user-a', idempotencyKey: key, runInput: { query: 'from a' } });
    expect(againA.body).toBe(a.body);
    await expect(executeTurn(engine, { tenant, workflowId, principal: 'key-1/user-a', idempotencyKey: key, runInput: { query: 'other' } })).rejects.toMatchObject({ code: 'idempotency_mismatch' });
  });

  it('a retry of turn 3 after turns 4 and 5 committed still replays turn 3', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'one' } });
    const runId = first.response.run_id;
    await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { query: 'two' } });
    const key = randomBytes(16).toString('hex');
    const third = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 2, runInput: { query: 'three' }, idempotencyKey: key, principal: 'p' });
    await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 3, runInput: { query: 'four' } });
    await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 4, runInput: { query: 'five' } });
    const calls = model.calls;
    const retry = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 2, runInput: { query: 'three' }, idempotencyKey: key, principal: 'p' });
    expect(retry.replayed).toBe(true);
    expect(retry.body).toBe(third.body);
    expect(model.calls).toBe(calls);
    // without the key, the same request is a stale turn number
    await expect(executeTurn(engine, { tenant, workflowId, runId, turnNumber: 2, runInput: { query: 'three' } })).rejects.toMatchObject({ code: 'turn_conflict' });
  });

  it('a first turn on an execute key needs a key of 128 random bits', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const served = await serveApp(engine);
    try {
      const workflowId = await newWorkflow(engine, served.tenant, fixture('form-then-llm'));
      const execute = await served.addKey(served.tenant, 'execute', [workflowId]);
      const path = `/workflows/v1/workflows/${workflowId}/execute`;
      const body = { run_input: { query: 'story' } };
      const short = await served.call('POST', path, { key: execute, body, headers: { 'idempotency-key': 'retry-1' } });
      expect(short.status).toBe(400);
      expect(short.json).toMatchObject({ code: 'invalid_request', field: 'Idempotency-Key' });
      const uuid = await served.call('POST', path, { key: execute, body, headers: { 'idempotency-key': crypto.randomUUID() } });
      expect(uuid.status, uuid.text).toBe(200);
      // an admin key may use any key it likes
      const admin = await served.call('POST', path, { body, headers: { 'idempotency-key': 'retry-1' } });
      expect(admin.status, admin.text).toBe(200);
    } finally {
      await served.close();
    }
  });
});

describe('a claimless turn against an async turn claimed after it read the run', () => {
  it('never lets the async turn lose after its model call (50 races)', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    let asyncWins = 0;
    let syncWins = 0;
    for (let i = 0; i < 50; i++) {
      const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } });
      const runId = first.response.run_id;
      const calls = model.calls;
      // the pure turn: a query to the paused run (recorded, the form asked again)
      const pure = executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { query: `chatter ${i}` } });
      // the async turn: the form's answer, which calls the model
      const async = (async () => {
        const begun = await claimNextTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: `moon ${i}` } } }, { async: true });
        if (!('claim' in begun)) throw new Error('no claim');
        return runAsyncTurn(engine, { ...begun.request, runId }, { token: begun.claim.token, turn: begun.claim.turn }, { claimed: { prepared: begun.prepared, fresh: true } });
      })();
      const [p, a] = await Promise.allSettled([pure, async]);
      const modelCalled = model.calls > calls;
      if (a.status === 'fulfilled') asyncWins++;
      if (p.status === 'fulfilled') syncWins++;
      expect((p.status === 'fulfilled' ? 1 : 0) + (a.status === 'fulfilled' ? 1 : 0)).toBe(1);
      // a model call was made for turn 2 only if the async turn is the one that committed it
      if (modelCalled) expect(a.status).toBe('fulfilled');
    }
    console.log(`50 races: the async turn committed ${asyncWins}, the pure turn ${syncWins}`);
  }, 60_000);
});

describe('what an abandoned or committed turn leaves behind', () => {
  it('an abandoned claim expires by TTL a day after its lease; a committed turn leaves no claim', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'one' } });
    const runId = first.response.run_id;
    const claimsOf = async () => {
      const { doc, tableName } = testTable();
      const { Items = [] } = await doc.send(new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        FilterExpression: 'kind = :c',
        ExpressionAttributeValues: { ':pk': keys.session(tenant, runId), ':c': 'claim' },
        ConsistentRead: true,
      }));
      return Items;
    };
    expect(await claimsOf()).toEqual([]);
    // a request that claimed turn 2 and died
    const begun = await claimNextTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { query: 'two' } });
    if (!('claim' in begun)) throw new Error('no claim');
    const [abandoned, ...more] = await claimsOf();
    expect(more).toEqual([]);
    expect(abandoned).toMatchObject({ sk: keys.turn(2), claim_token: begun.claim.token });
    expect(abandoned?.ttl).toBe(Math.ceil(begun.claim.expiresAt / 1000) + CLAIM_TTL_GRACE_SECONDS);
    console.log(`abandoned claim: ${itemSize(abandoned as Record<string, unknown>)} B, expires by TTL ${CLAIM_TTL_GRACE_SECONDS} s after its lease`);
  });
});
