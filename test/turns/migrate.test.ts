/**
 * What migrating paused runs costs (lib/turns/migrate.ts): per run one consistent Query and one
 * transaction (the turn record and the head's new version), counted by the SDK's middleware and
 * DynamoDB's reported capacity and cross-checked by arithmetic from the item sizes; a dry run only
 * reads. The figures go to the console. And the commit itself: the turn and the new version are
 * written together or not at all.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { itemSize } from '../../lib/store/blobs';
import { NotFoundError } from '../../lib/store/errors';
import { commitMigration } from '../../lib/store/migrations';
import { loadSession } from '../../lib/store/sessions';
import { keys, SESSION_HEAD_SK } from '../../lib/store/item-keys';
import type { StoreContext } from '../../lib/store/dynamo';
import { createDynamoClients } from '../../lib/store/setup';
import { addVersion } from '../../lib/store/workflows';
import { executeTurn } from '../../lib/turns/execute';
import { migrateRuns } from '../../lib/turns/migrate';
import { graph } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';

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

const FORM = (extra: Record<string, never> | Record<string, [string, Record<string, unknown>]> = {}) => graph({
  begin: ['Begin', { mode: 'task' }, ['UserFillUp:Ask']],
  'UserFillUp:Ask': ['UserFillUp', { tips: 'Who are you?', inputs: { name: { name: 'Name', type: 'line', optional: false } } }, ['Message:Hello']],
  'Message:Hello': ['Message', { content: ['Hello {UserFillUp:Ask@name}'] }],
  ...extra,
});

describe('the cost of a migration', () => {
  it('is one Query and one transaction per run; a dry run writes nothing', async () => {
    const { store, take } = countingStore();
    const engine = { ...testEngine(), store };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, FORM());
    const runs: string[] = [];
    for (let i = 0; i < 6; i++) runs.push((await executeTurn(engine, { tenant, workflowId, runInput: {} })).response.run_id);
    await addVersion(store, tenant, workflowId, FORM({ 'Message:Extra': ['Message', { content: ['more'] }] }), true);
    const render = (r: unknown) => JSON.stringify(r);
    const migrate = (ids: string[], dryRun: boolean) => migrateRuns(engine, { tenant, workflowId, toVersion: 2, target: { runs: ids }, dryRun }, render);

    // the first call reads the workflow and compiles both versions (kept per process afterwards)
    take();
    await migrate(runs.slice(0, 3), true);
    const planFirst = take();
    await migrate(runs.slice(0, 3), true);
    const plan = take();
    expect(plan.ops.filter((op) => op !== 'Query' && op !== 'GetItem')).toEqual([]);
    expect(plan.wru).toBe(0);

    await migrate(runs.slice(0, 1), false);
    const one = take();
    await migrate(runs.slice(1, 6), false);
    const five = take();
    const perRun = (five.trips - one.trips) / 4;
    expect(perRun).toBe(2);
    expect(five.ops.filter((op) => op === 'TransactWriteItems')).toHaveLength(5);
    const wruPerRun = (five.wru - one.wru) / 4;
    // by arithmetic (AWS's pricing): a transaction bills each item at 2 WRU per started KB, and the
    // listing index's copy of the head (its version, turn, updated_at change) 1 WRU
    const item = async (sk: string) => (await store.doc.send(new GetCommand({ TableName: store.table, Key: { pk: keys.session(tenant, runs[5] as string), sk } }))).Item as Record<string, unknown>;
    const recordBytes = itemSize(await item(keys.turn(2)));
    const headBytes = itemSize(await item(SESSION_HEAD_SK));
    const priced = 2 * Math.ceil(recordBytes / 1024) + 2 * Math.ceil(headBytes / 1024) + 1;
    console.log(`migration: dry run of 3 runs ${plan.trips} round trips (${planFirst.trips} when the versions are not compiled yet), 0 WRU; a real one ${one.trips} round trips for 1 run (${one.ops.join(', ')}), ${five.trips} for 5; per run ${perRun} round trips, ${wruPerRun} WRU reported by DynamoDB Local, ${priced} WRU by arithmetic (record ${recordBytes} B, head ${headBytes} B)`);
    expect(priced).toBeLessThanOrEqual(7);
    expect(wruPerRun).toBeGreaterThanOrEqual(priced);
  });
});

describe('the migration commit', () => {
  it('writes the turn and the new version together or not at all', async () => {
    const engine = testEngine();
    const { store } = engine;
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, FORM());
    const runId = (await executeTurn(engine, { tenant, workflowId, runInput: {} })).response.run_id;
    const { head, latest, storedBlobs } = await loadSession(store, tenant, runId, 0);
    const commit = (version: number) => commitMigration(store, {
      head: { ...head, version },
      turn: head.turn + 1,
      token: `t${version}`,
      toVersion: 3,
      status: 'waiting_for_input',
      payload: { state: latest?.state, request: {}, response: '{}', history: [] },
      keyHash: null,
      fingerprint: null,
      ttlSeconds: 3600,
      dueAt: null,
      storedBlobs,
    });
    const slot = async () => (await store.doc.send(new GetCommand({ TableName: store.table, Key: { pk: keys.session(tenant, runId), sk: keys.turn(2) }, ConsistentRead: true }))).Item;
    // read as if on another version than the head holds: the head refuses, so the free slot stays free
    await expect(commit(7)).rejects.toBeInstanceOf(NotFoundError);
    expect(await slot()).toBeUndefined();
    expect((await loadSession(store, tenant, runId, 0)).head).toMatchObject({ version: 1, turn: 1 });
    // as read: both move
    await commit(1);
    expect(await slot()).toMatchObject({ kind: 'turn', turn: 2 });
    expect((await loadSession(store, tenant, runId, 0)).head).toMatchObject({ version: 3, turn: 2 });
  });
});

