/**
 * Crash safety: a turn that dies at any point — after claiming, after any component, before
 * the commit, or when the commit itself fails — leaves the run exactly at the previous turn;
 * once the claim's lease expires, a retry completes the turn. Time is the test's own clock
 * (engine and store): it stands still while the test runs, however slow the machine, so the
 * dead request's claim holds until the test moves the clock past the lease.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../lib/store/item-keys';
import { TurnInProgressError } from '../../lib/store/errors';
import { createDynamoClients } from '../../lib/store/setup';
import { listTurns, loadSession } from '../../lib/store/sessions';
import { executeTurn, type TurnHooks } from '../../lib/turns/execute';
import { fixture } from '../helpers/canvas';
import { newTenant, newWorkflow, testEngine, testStore } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';

// long, so that nothing here could outlive it even on the wall clock; the test's clock passes it
const LEASE_MS = 60_000;
class Crash extends Error {}

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
  server.respond = (body) => ({ kind: 'text', text: `about ${body.messages.at(-1)?.content}` });
});
afterAll(async () => {
  await server.close();
});

type Point = { name: string; hooks: (store: ReturnType<typeof testStore>) => TurnHooks };

const crashAfterNode = (n: number): Point => ({
  name: `after component ${n}`,
  hooks: () => {
    let finished = 0;
    return {
      afterEvent(event) {
        if (event.event === 'node_finished' && ++finished === n) throw new Crash('killed');
      },
    };
  },
});

const points: Point[] = [
  { name: 'after claiming', hooks: () => ({ afterClaim: () => { throw new Crash('killed'); } }) },
  crashAfterNode(1),
  crashAfterNode(2),
  crashAfterNode(3),
  { name: 'before the commit', hooks: () => ({ beforeCommit: () => { throw new Crash('killed'); } }) },
  {
    // DynamoDB unreachable at the commit: the write fails for real (a client on a closed port)
    name: 'when the commit fails',
    hooks: (store) => ({
      beforeCommit() {
        store.doc = createDynamoClients({ endpoint: 'http://127.0.0.1:9' }).doc;
      },
    }),
  },
];

/** The claims (placeholders of turns not committed) in a run's partition. */
async function claimsOf(tenant: string, runId: string): Promise<Record<string, unknown>[]> {
  const store = testStore();
  const { Items = [] } = await store.doc.send(new QueryCommand({
    TableName: store.table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'kind = :claim',
    ExpressionAttributeValues: { ':pk': keys.session(tenant, runId), ':claim': 'claim' },
    ConsistentRead: true,
  }));
  return Items;
}

describe('crash injection', () => {
  it.each(points)('a turn killed $name leaves the run at the previous turn; a retry completes after the lease', async ({ hooks }) => {
    const tenant = newTenant();
    let now = Date.now();
    const store = { ...testStore(), now: () => now };
    // a retry that met a live claim of its key would wait for it: here it must not wait at all
    const engine = { ...testEngine({ openaiUrl: server.url, leaseMs: LEASE_MS, store }), clock: () => now, idempotencyWaitMs: 0 };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } });
    const runId = first.response.run_id;
    const before = await loadSession(testStore(), tenant, runId, 5);

    const original = store.doc;
    await expect(
      executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } }, idempotencyKey: 'k1', hooks: hooks(store) }),
    ).rejects.toBeDefined();
    store.doc = original;

    const after = await loadSession(testStore(), tenant, runId, 5);
    expect(after.head.turn).toBe(1);
    expect(after.latest).toEqual(before.latest);
    expect(after.history).toEqual(before.history);
    expect((await listTurns(testStore(), tenant, runId, 0, 10)).turns.map((t) => t.turn)).toEqual([1]);

    // what the dead request left behind is at most its claim, which expires by itself
    const left = await claimsOf(tenant, runId);
    expect(left.length).toBe(after.head.claim ? 1 : 0);
    for (const claim of left) expect(typeof claim.ttl).toBe('number');
    // the dead request's claim still holds the turn...
    if (after.head.claim) {
      await expect(executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } } })).rejects.toBeInstanceOf(TurnInProgressError);
    }
    // ...until its lease expires; the retry with the same key then completes the turn
    now += LEASE_MS + 1;
    const retry = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } }, idempotencyKey: 'k1' });
    expect(retry.response).toMatchObject({ turn_number: 2, status: 'completed', outputs: { content: 'about Topic: moon' } });
    expect((await listTurns(testStore(), tenant, runId, 0, 10)).turns.map((t) => t.turn)).toEqual([1, 2]);
    // the commit replaced the claim: none is left
    expect(await claimsOf(tenant, runId)).toEqual([]);
    // and a second retry replays it without running anything
    const calls = server.calls;
    const replay = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } }, idempotencyKey: 'k1' });
    expect(replay.body).toBe(retry.body);
    expect(server.calls).toBe(calls);
  });
});
