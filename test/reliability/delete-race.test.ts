/**
 * A run deleted while a turn of it is in flight, on every path a turn commits by: a synchronous
 * turn (claimless, or claimed for a model call), an async turn committed by the worker, a timer
 * firing, a stop (a stop turn, and a stop reaching an async turn through its cancel flag). Each
 * round forces one interleaving with the turn hooks — the deletion completes before the commit,
 * or mid-turn (after the claim, after a checkpoint, after the first event), or is started there
 * or at the commit without waiting for it, or both are started at once. Afterwards each run's
 * partition, then a scan of the table, holds no item of a deleted run without a TTL (only the
 * marked head and the tombstone, for a day), and the cleanup that runs when a head's TTL
 * passes leaves nothing at all. No clock is waited on.
 */
import { DeleteCommand, QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cascadeRemovedHeads } from '../../lib/store/cleanup';
import { partsOf } from '../../lib/store/sessions';
import { keys, SESSION_HEAD_SK } from '../../lib/store/item-keys';
import { DELETED_SESSION_TTL_SECONDS } from '../../lib/store/turn-slot';
import { runAsyncTurn } from '../../lib/turns/async-turn';
import { claimNextTurn, executeTurn, StopAccepted, type TurnEngine, type TurnHooks } from '../../lib/turns/execute';
import { deleteRun } from '../../lib/turns/runs';
import { fireTimer } from '../../lib/turns/timers';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

const timed = graph({
  begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Confirm']],
  'UserFillUp:Confirm': [
    'UserFillUp',
    { tips: 'Confirm within a minute', inputs: { ok: { name: 'OK?', type: 'boolean', optional: false } }, timeout_seconds: 60, timeout_goto: ['Message:TooLate'] },
    ['Message:Thanks', 'Message:TooLate'],
  ],
  'Message:Thanks': ['Message', { content: ['Confirmed'] }],
  'Message:TooLate': ['Message', { content: ['No answer in time'] }],
});

/** Races per kind of commit. */
const ROUNDS = 50;
/** A kind's 50 races take a few seconds; a loaded machine may make that many more. */
const RACE_TIMEOUT_MS = 120_000;

/** One tenant for every race: the scan at the end filters on it. */
const tenant = newTenant();
let model: OpenAiServer;
let engine: TurnEngine;

/**
 * Where the deletion meets the turn: completed before the commit, or mid-turn (after the claim,
 * a checkpoint or the first event, by kind); started then without waiting (`during`, `at-commit`);
 * started with the turn (`together`).
 */
type Timing = 'before-commit' | 'mid-turn' | 'during' | 'at-commit' | 'together';
const TIMINGS: Timing[] = ['before-commit', 'mid-turn', 'during', 'at-commit', 'together'];

/** A turn of some kind, with the hooks that let the test place the deletion. */
interface TurnUnderTest {
  run(hooks: TurnHooks & { afterCheckpoint?(): Promise<void> }): Promise<unknown>;
  /** The hook that means "mid-turn" for this kind. */
  mid: 'afterClaim' | 'afterEvent' | 'afterCheckpoint';
}

type Outcome = 'committed' | 'not_found';

/**
 * One round: the turn and the deletion, interleaved as `timing` says. The deletion always
 * succeeds (the run exists until it deletes it); the turn commits only if its commit came first.
 */
async function race(tenant: string, runId: string, turn: TurnUnderTest, timing: Timing): Promise<Outcome> {
  let deletion: Promise<void> | undefined;
  const del = () => (deletion ??= deleteRun(engine, tenant, runId));
  const hooks: TurnHooks & { afterCheckpoint?(): Promise<void> } = {};
  let first = true;
  if (timing === 'before-commit') hooks.beforeCommit = () => del();
  if (timing === 'at-commit') hooks.beforeCommit = () => void del();
  if (timing === 'mid-turn' || timing === 'during') {
    hooks[turn.mid] = async () => {
      if (!first) return;
      first = false;
      if (timing === 'mid-turn') await del();
      else void del();
    };
  }
  const running = turn.run(hooks);
  if (timing === 'together') del();
  const [t, d] = await Promise.allSettled([running, running.catch(() => undefined).then(() => del())]);
  if (d.status === 'rejected') throw d.reason;
  const outcome = outcomeOf(t);
  // a deletion that completed before the commit always wins
  if (timing === 'before-commit' || timing === 'mid-turn') expect(outcome, `${timing}: ${JSON.stringify(t)}`).toBe('not_found');
  return outcome;
}

function outcomeOf(settled: PromiseSettledResult<unknown>): Outcome {
  if (settled.status === 'fulfilled') return 'committed';
  const error = settled.reason as { code?: string };
  if (error?.code === 'not_found') return 'not_found';
  throw settled.reason;
}

/** Turn records decoded (their response), for a readable failure. */
const decoded = (items: Record<string, unknown>[]) =>
  items.map((i) => (i.z instanceof Uint8Array ? { ...i, z: undefined, response: partsOf(i, ['r'], new Map()).r } : i));

/** Every item of the tenant's runs, from a scan of the table. */
async function scanRuns(tenant: string): Promise<Record<string, unknown>[]> {
  const { doc, tableName } = testTable();
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({
      TableName: tableName,
      FilterExpression: 'begins_with(pk, :p)',
      ExpressionAttributeValues: { ':p': `T#${tenant}#S#` },
      ExclusiveStartKey: start,
      ConsistentRead: true,
    }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return decoded(items);
}

/** Every item of one run's partition. */
async function itemsOfRun(tenant: string, runId: string): Promise<Record<string, unknown>[]> {
  const { doc, tableName } = testTable();
  const { Items = [] } = await doc.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) }, ConsistentRead: true }));
  return decoded(Items);
}

/** A deleted run leaves only its marked head and the tombstone in its next slot, each with a TTL of a day. */
function expectOnlyWhatExpires(items: Record<string, unknown>[]): void {
  const nowSec = Math.floor(Date.now() / 1000);
  expect(items.filter((i) => typeof i.ttl !== 'number'), 'items of deleted runs without a TTL').toEqual([]);
  for (const item of items) {
    if (item.sk === SESSION_HEAD_SK) expect(item.deleted_at, JSON.stringify(item)).toEqual(expect.any(Number));
    else expect(item.kind, JSON.stringify(item)).toBe('tombstone');
    expect(item.ttl as number).toBeLessThanOrEqual(nowSec + DELETED_SESSION_TTL_SECONDS);
  }
}

/** The runs every kind of race deleted, in the suite's tenant. */
const deleted: string[] = [];

/** Runs `rounds` races of one kind of turn, cycling through the timings. */
async function races(tenant: string, rounds: number, label: string, setup: () => Promise<(round: number) => Promise<{ runId: string; turn: TurnUnderTest }>>) {
  const next = await setup();
  const counts: Record<string, number> = {};
  const runIds: string[] = [];
  // each round is a run of its own: a few at a time, one per timing
  for (let from = 0; from < rounds; from += TIMINGS.length) {
    await Promise.all(Array.from({ length: Math.min(TIMINGS.length, rounds - from) }, async (_, k) => {
      const round = from + k;
      const timing = TIMINGS[round % TIMINGS.length] as Timing;
      const { runId, turn } = await next(round);
      runIds.push(runId);
      const outcome = await race(tenant, runId, turn, timing);
      counts[`${timing} ${outcome}`] = (counts[`${timing} ${outcome}`] ?? 0) + 1;
    }));
  }
  const left = (await Promise.all(runIds.map((runId) => itemsOfRun(tenant, runId)))).flat();
  expectOnlyWhatExpires(left);
  deleted.push(...runIds);
  console.log(`${label}, ${rounds} races: ${JSON.stringify(counts)}; ${left.length} items left (marked heads and tombstones)`);
}

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `about ${body.messages.at(-1)?.content}` });
  engine = testEngine({ openaiUrl: model.url });
});
afterAll(async () => {
  await model.close();
});

describe('a run deleted while a turn commits', () => {
  it('sync turns: a claimless re-pause, or a form answer claimed for its model call', async () => {
    await races(tenant, ROUNDS, 'sync', async () => {
      const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
      return async (round) => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } })).response.run_id;
        const withModel = round % 2 === 1;
        return {
          runId,
          turn: {
            mid: withModel ? 'afterClaim' : 'afterEvent',
            run: (hooks) => executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: withModel ? { inputs: { topic: `moon ${round}` } } : { query: `chatter ${round}` }, hooks }),
          },
        };
      };
    });
  }, RACE_TIMEOUT_MS);

  it('async turns committed by the worker', async () => {
    await races(tenant, ROUNDS, 'async', async () => {
      const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
      return async (round) => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } })).response.run_id;
        const begun = await claimNextTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: `moon ${round}` } } }, { async: true });
        if (!('claim' in begun)) throw new Error('no claim');
        return {
          runId,
          turn: {
            mid: 'afterCheckpoint',
            run: ({ afterCheckpoint, ...hooks }) =>
              runAsyncTurn(engine, { ...begun.request, runId, hooks }, { token: begun.claim.token, turn: begun.claim.turn }, {
                claimed: { prepared: begun.prepared, fresh: true },
                ...(afterCheckpoint ? { hooks: { afterCheckpoint } } : {}),
              }),
          },
        };
      };
    });
  }, RACE_TIMEOUT_MS);

  it('timer firings', async () => {
    await races(tenant, ROUNDS, 'timer', async () => {
      const workflowId = await newWorkflow(engine, tenant, timed);
      return async () => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'start' } })).response.run_id;
        return { runId, turn: { mid: 'afterEvent', run: (hooks) => fireTimer(engine, tenant, runId, { hooks }) } };
      };
    });
  }, RACE_TIMEOUT_MS);

  it('stops: a stop turn, and a stop reaching an async turn that the worker then commits as cancelled', async () => {
    await races(tenant, ROUNDS, 'stop', async () => {
      const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
      return async (round) => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } })).response.run_id;
        if (round % 2 === 0) {
          return { runId, turn: { mid: 'afterEvent', run: (hooks) => executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: {}, command: 'stop', hooks }) } };
        }
        const begun = await claimNextTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } } }, { async: true });
        if (!('claim' in begun)) throw new Error('no claim');
        return {
          runId,
          turn: {
            mid: 'afterCheckpoint',
            run: async ({ afterCheckpoint, ...hooks }) => {
              let stopped = false;
              const result = await runAsyncTurn(engine, { ...begun.request, runId, hooks }, { token: begun.claim.token, turn: begun.claim.turn }, {
                claimed: { prepared: begun.prepared, fresh: true },
                hooks: {
                  // the stop lands after the model call's checkpoint: the worker commits the turn as cancelled
                  async afterCheckpoint() {
                    const stop = await executeTurn(engine, { tenant, workflowId, runId, runInput: {}, command: 'stop' }).catch((error: unknown) => error);
                    // accepted, unless the deletion came first
                    if (stop instanceof StopAccepted) stopped = true;
                    else expect(stop).toMatchObject({ code: 'not_found' });
                    await afterCheckpoint?.();
                  },
                },
              });
              if (stopped && result.kind === 'committed') expect(result.result.response.status).toBe('cancelled');
              return result;
            },
          },
        };
      };
    });
  }, RACE_TIMEOUT_MS);

  it('afterwards, a scan of the table finds no item of a deleted run without a TTL; the cleanup removes the rest when the heads expire', async () => {
    const nowSec = Math.floor(Date.now() / 1000);
    const left = await scanRuns(tenant);
    expectOnlyWhatExpires(left);
    expect(left.length).toBe(2 * deleted.length);
    const life = Math.max(0, ...left.map((i) => (i.ttl as number) - nowSec));
    // each head's TTL passes: DynamoDB removes it, and the stream hands its key to the cleanup
    const { doc, tableName } = testTable();
    const removed = deleted.map((runId) => ({ id: runId, pk: keys.session(tenant, runId), sk: SESSION_HEAD_SK }));
    await Promise.all(removed.map((r) => doc.send(new DeleteCommand({ TableName: tableName, Key: { pk: r.pk, sk: r.sk } }))));
    const cleanup = await cascadeRemovedHeads(engine.store, removed);
    expect(cleanup.failed).toEqual([]);
    expect((await Promise.all(deleted.map((runId) => itemsOfRun(tenant, runId)))).flat()).toEqual([]);
    console.log(`${deleted.length} deleted runs: ${left.length} items left, all with a TTL (at most ${life} s away); the cleanup removed ${cleanup.deleted} more once the heads were gone`);
  }, RACE_TIMEOUT_MS);

  it('over HTTP: a turn whose run is deleted while its model call runs answers 404, and leaves only what expires', async () => {
    const served = await serveApp(engine);
    const respond = model.respond;
    try {
      const workflowId = (await served.call('POST', '/workflows/v1/workflows', { body: { name: 'story', dsl: fixture('form-then-llm') } })).json.id as string;
      const path = `/workflows/v1/workflows/${workflowId}/execute`;
      const runId = (await served.call('POST', path, { body: { run_input: { query: 'story' } } })).json.run_id as string;
      // the model call is held open (no clock) until the run is deleted
      let reached!: () => void;
      const atModel = new Promise<void>((resolve) => (reached = resolve));
      let release!: () => void;
      const deleted = new Promise<void>((resolve) => (release = resolve));
      model.respond = () => {
        reached();
        return { kind: 'text', text: 'too late', until: deleted };
      };
      const turn = served.call('POST', path, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { topic: 'moon' } } } });
      await atModel;
      expect((await served.call('DELETE', `/workflows/v1/workflow-runs/${runId}`)).status).toBe(204);
      release();
      const answer = await turn;
      expect([answer.status, answer.json.code], answer.text).toEqual([404, 'not_found']);
      expect((await served.call('GET', `/workflows/v1/workflow-runs/${runId}`)).status).toBe(404);
      expect((await served.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/2`)).status).toBe(404);
      const left = await itemsOfRun(served.tenant, runId);
      expect(left.map((i) => [i.sk, i.kind, typeof i.ttl])).toEqual([[keys.turn(2), 'tombstone', 'number'], [SESSION_HEAD_SK, 'session', 'number']]);
    } finally {
      model.respond = respond;
      await served.close();
    }
  });
});
