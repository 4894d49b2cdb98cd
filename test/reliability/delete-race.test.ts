/**
 * A run deleted while a turn of it is in flight, on every path a turn commits by: a synchronous
 * turn (claimless, or claimed for a model call), an async turn committed by the worker, a timer
 * firing, a stop (a stop turn, and a stop reaching an async turn through its cancel flag). Each
 * round forces one interleaving with the turn hooks — the deletion completes before the commit,
 * or mid-turn (after the claim, after a checkpoint, after the first event), or is started there
 * or at the commit without waiting for it, or both are started at once. Afterwards the table is scanned:
 * no item of a deleted run is left without a TTL, and the cleanup that runs when the head's TTL
 * passes leaves nothing at all. No clock is waited on.
 */
import { DeleteCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cascadeRemovedHeads } from '../../lib/store/cleanup';
import { decodeParts } from '../../lib/store/codec';
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
import { OpenAiServer } from '../llm/openai-server';

/** Rounds per kind of commit (EASEL_DELETE_RACES overrides). */
const ROUNDS = Number(process.env.EASEL_DELETE_RACES ?? 50);

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

let model: OpenAiServer;
let engine: TurnEngine;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `about ${body.messages.at(-1)?.content}` });
  engine = testEngine({ openaiUrl: model.url });
});
afterAll(async () => {
  await model.close();
});

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

/** Every item of the tenant's runs, from a scan of the table, turn records decoded. */
async function itemsOfRuns(tenant: string): Promise<Record<string, unknown>[]> {
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
  return items.map((i) => (i.p instanceof Uint8Array ? { ...i, p: undefined, response: decodeParts(i.p, ['r'], new Map()).r } : i));
}

/**
 * What the deleted runs left: only the marked head and the tombstone, each with a TTL of a
 * day; once the head is removed (as DynamoDB's TTL will), the cleanup takes the rest.
 */
async function expectNothingImmortal(tenant: string, runIds: string[]): Promise<string> {
  const nowSec = Math.floor(Date.now() / 1000);
  const left = await itemsOfRuns(tenant);
  const immortal = left.filter((i) => typeof i.ttl !== 'number');
  expect(immortal, 'items of deleted runs without a TTL').toEqual([]);
  for (const item of left) {
    if (item.sk === SESSION_HEAD_SK) expect(item.deleted_at, JSON.stringify(item)).toEqual(expect.any(Number));
    else expect(item.kind, JSON.stringify(item)).toBe('tombstone');
    expect(item.ttl as number).toBeLessThanOrEqual(nowSec + DELETED_SESSION_TTL_SECONDS);
  }
  const life = Math.max(...left.map((i) => (i.ttl as number) - nowSec));
  // the head's TTL passes: DynamoDB removes it, the stream hands its key to the cleanup
  const { doc, tableName } = testTable();
  const removed = [];
  for (const runId of runIds) {
    const pk = keys.session(tenant, runId);
    await doc.send(new DeleteCommand({ TableName: tableName, Key: { pk, sk: SESSION_HEAD_SK } }));
    removed.push({ id: runId, pk, sk: SESSION_HEAD_SK });
  }
  const cleanup = await cascadeRemovedHeads(engine.store, removed);
  expect(cleanup.failed).toEqual([]);
  expect(await itemsOfRuns(tenant)).toEqual([]);
  return `${left.length} items left (marked heads and tombstones, TTL in ${life} s), ${cleanup.deleted} removed by the cleanup`;
}

/** Runs `ROUNDS` races of one kind of turn, cycling through the timings. */
async function races(label: string, setup: (tenant: string) => Promise<(round: number) => Promise<{ runId: string; turn: TurnUnderTest }>>) {
  const tenant = newTenant();
  const next = await setup(tenant);
  const counts: Record<string, number> = {};
  const runIds: string[] = [];
  // each round is a run of its own: a few at a time, one per timing
  for (let from = 0; from < ROUNDS; from += TIMINGS.length) {
    await Promise.all(Array.from({ length: Math.min(TIMINGS.length, ROUNDS - from) }, async (_, k) => {
      const round = from + k;
      const timing = TIMINGS[round % TIMINGS.length] as Timing;
      const { runId, turn } = await next(round);
      runIds.push(runId);
      const outcome = await race(tenant, runId, turn, timing);
      counts[`${timing} ${outcome}`] = (counts[`${timing} ${outcome}`] ?? 0) + 1;
    }));
  }
  const left = await expectNothingImmortal(tenant, runIds);
  console.log(`${label}, ${ROUNDS} races: ${JSON.stringify(counts)}; ${left}`);
}

describe('a run deleted while a turn commits', () => {
  it('sync turns: a claimless re-pause, or a form answer claimed for its model call', async () => {
    await races('sync', async (tenant) => {
      const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
      return async (round) => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } })).response.run_id;
        const model = round % 2 === 1;
        return {
          runId,
          turn: {
            mid: model ? 'afterClaim' : 'afterEvent',
            run: (hooks) => executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: model ? { inputs: { topic: `moon ${round}` } } : { query: `chatter ${round}` }, hooks }),
          },
        };
      };
    });
  });

  it('async turns committed by the worker', async () => {
    await races('async', async (tenant) => {
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
  });

  it('timer firings', async () => {
    await races('timer', async (tenant) => {
      const workflowId = await newWorkflow(engine, tenant, timed);
      return async () => {
        const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'start' } })).response.run_id;
        return { runId, turn: { mid: 'afterEvent', run: (hooks) => fireTimer(engine, tenant, runId, { hooks }) } };
      };
    });
  });

  it('stops: a stop turn, and a stop reaching an async turn that the worker then commits as cancelled', async () => {
    await races('stop', async (tenant) => {
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
  });
});
