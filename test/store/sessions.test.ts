import { readFileSync } from 'node:fs';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient, GetRecordsCommand, GetShardIteratorCommand, DescribeStreamCommand } from '@aws-sdk/client-dynamodb-streams';
import { DeleteCommand, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { handler } from '../../functions/session-cleanup';
import { NotFoundError } from '../../lib/store/errors';
import { keys } from '../../lib/store/item-keys';
import { LOCAL_CREDENTIALS } from '../../lib/store/setup';
import { deleteSession } from '../../lib/store/deletion';
import { listSessions } from '../../lib/store/session-listing';
import { encode, encodeParts } from '../../lib/store/codec';
import { getHead, getTurn, loadSession, partsOf, rawStateOf, sessionExpiry } from '../../lib/store/sessions';
import { DELETED_SESSION_TTL_SECONDS, MAX_SLOT_READ_AGE_MS } from '../../lib/store/turn-slot';
import { createRun, executeTurn, newRunId } from '../../lib/turns/execute';
import { fixture, steppingClock } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine, testStore } from '../helpers/engine';

const engine = testEngine();

async function itemsOf(tenant: string, runId: string): Promise<string[]> {
  const { doc, tableName } = testTable();
  const { Items = [] } = await doc.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) } }));
  return Items.map((i) => i.sk as string);
}

describe('session listing', () => {
  it('lists a workflow’s sessions newest first, by user, page by page, and nothing of others', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const otherWorkflow = await newWorkflow(engine, tenant, fixture('form-intake'));
    const ids: string[] = [];
    for (const user of ['ann', 'bob', 'ann']) {
      ids.push((await createRun(engine, { tenant, workflowId, userId: user })).head.id);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await createRun(engine, { tenant, workflowId: otherWorkflow });
    // the same workflow id in another tenant is another workflow
    const stranger = newTenant();
    await newWorkflow(engine, stranger, fixture('form-intake'), workflowId);
    await createRun(engine, { tenant: stranger, workflowId });
    await expect(createRun(engine, { tenant: newTenant(), workflowId })).rejects.toBeInstanceOf(NotFoundError);
    await executeTurn(engine, { tenant, workflowId, runId: ids[0] as string, runInput: { query: 'hi' } });

    const all = await listSessions(engine.store, tenant, workflowId, { limit: 10 });
    expect(all.items.map((s) => s.id)).toEqual([...ids].reverse());
    expect(all.items.find((s) => s.id === ids[0])).toMatchObject({ status: 'waiting_for_input', turn: 1, userId: 'ann', version: 1 });
    const ann = await listSessions(engine.store, tenant, workflowId, { limit: 10, userId: 'ann' });
    expect(ann.items.map((s) => s.id)).toEqual([ids[2], ids[0]]);
    const page1 = await listSessions(engine.store, tenant, workflowId, { limit: 2 });
    expect(page1.items).toHaveLength(2);
    const page2 = await listSessions(engine.store, tenant, workflowId, { limit: 2, cursor: page1.cursor });
    expect([...page1.items, ...page2.items].map((s) => s.id)).toEqual([...ids].reverse());
  });
});

describe('session listing after a turn', () => {
  const answer = { inputs: { name: 'A', age: 3, plan: 'free' } };

  it('a status change writes the head alone (1 WRU, no index entry), and listings read it from there', async () => {
    const tenant = newTenant();
    const heads: number[] = [];
    const store = { ...testStore(), onCapacity: (operation: string, units: { write: number }) => void (operation === 'head' && heads.push(units.write)) };
    const metered = { ...engine, store };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = (await executeTurn(metered, { tenant, workflowId, runInput: { query: 'hi' } })).response.run_id;
    const second = await executeTurn(metered, { tenant, workflowId, runId, runInput: answer });
    expect(second.response.status).toBe('completed');
    // DynamoDB reports the head's write and any index entry's together
    expect(heads).toEqual([1]);
    const listed = await listSessions(engine.store, tenant, workflowId, { limit: 5 });
    expect(listed.items).toEqual([expect.objectContaining({ id: runId, status: 'completed', turn: 2 })]);
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5, status: 'completed' })).items.map((i) => i.id)).toEqual([runId]);
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5, status: 'waiting_for_input' })).items).toEqual([]);
  });

  it('moves the TTL (an index entry more) only once a session has less than its TTL left, however far apart its turns', async () => {
    const tenant = newTenant();
    let at = Date.now();
    const heads: number[] = [];
    const store = { ...testStore(), now: () => at, onCapacity: (operation: string, units: { write: number }) => void (operation === 'head' && heads.push(units.write)) };
    const clocked = { ...engine, store, clock: () => at };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = (await executeTurn(clocked, { tenant, workflowId, runInput: { query: 'hi' } })).response.run_id;
    // a person's pace: minutes between turns, each changing the listed status
    for (let i = 0; i < 4; i++) {
      at += 5 * 60_000;
      await executeTurn(clocked, { tenant, workflowId, runId, runInput: i % 2 === 0 ? answer : { query: 'again' } });
    }
    expect(heads).toEqual([1, 1, 1, 1]);
    // a day on (a tenth of the default 30 days, at most a day): the TTL is due and moves once
    at += 86_400_000;
    await executeTurn(clocked, { tenant, workflowId, runId, runInput: answer });
    at += 5 * 60_000;
    await executeTurn(clocked, { tenant, workflowId, runId, runInput: { query: 'later' } });
    expect(heads.slice(4)).toEqual([2, 1]);
    expect((await getHead(engine.store, tenant, runId)).expiresAt).toBeGreaterThanOrEqual(Math.floor(at / 1000) + 30 * 86_400);
  });

  it('waits for the entry point when it takes the update for after the response; a timer is armed before', async () => {
    const tenant = newTenant();
    const later: (() => Promise<void>)[] = [];
    const deferring = { ...engine, afterResponse: (work: () => Promise<void>) => void later.push(work) };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = (await executeTurn(deferring, { tenant, workflowId, runInput: { query: 'hi' } })).response.run_id;
    expect(later).toHaveLength(0); // the first turn writes its head with the record
    await executeTurn(deferring, { tenant, workflowId, runId, runInput: answer });
    expect(later).toHaveLength(1);
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items).toEqual([expect.objectContaining({ status: 'waiting_for_input', turn: 1 })]);
    await later.pop()!();
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items).toEqual([expect.objectContaining({ status: 'completed', turn: 2 })]);

    // a form with a timer: the head enters the timer index before the turn returns
    const timed = await newWorkflow(engine, tenant, JSON.parse(readFileSync('examples/callback-request.json', 'utf8')).dsl);
    const started = await createRun(engine, { tenant, workflowId: timed });
    const paused = await executeTurn(deferring, { tenant, workflowId: timed, runId: started.head.id, runInput: { query: 'call me' } });
    expect(paused.response.has_background_work).toBe(true);
    expect(later).toHaveLength(0);
    expect((await getHead(engine.store, tenant, started.head.id)).dueAt).toEqual(expect.any(Number));
  });

  it('fills a page past the sessions a status filter leaves out', async () => {
    const tenant = newTenant();
    // every run created at a time of its own: the index orders by creation time
    const clock = steppingClock(Date.now());
    const clocked = { ...engine, store: { ...testStore(), now: clock }, clock };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const waiting: string[] = [];
    for (let i = 0; i < 4; i++) {
      const runId = (await executeTurn(clocked, { tenant, workflowId, runInput: { query: `q${i}` } })).response.run_id;
      if (i % 2 === 0) await executeTurn(clocked, { tenant, workflowId, runId, runInput: answer });
      else waiting.push(runId);
    }
    const page1 = await listSessions(engine.store, tenant, workflowId, { limit: 1, status: 'waiting_for_input', oldestFirst: true });
    const page2 = await listSessions(engine.store, tenant, workflowId, { limit: 1, status: 'waiting_for_input', oldestFirst: true, ...(page1.cursor ? { cursor: page1.cursor } : {}) });
    expect([...page1.items, ...page2.items].map((i) => i.id)).toEqual(waiting);
  });

  it('lists heads written before the listing attributes moved off the index, and moves them on', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' } })).response.run_id;
    const { doc, tableName } = testTable();
    const key = { pk: keys.session(tenant, runId), sk: 'T#~' };
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: key }));
    const { st, tn, ua, ...rest } = Item as Record<string, unknown>;
    expect([st, tn]).toEqual(['waiting_for_input', 1]);
    // the head as earlier versions wrote it: the listed attributes under the names the index projects
    await doc.send(new PutCommand({ TableName: tableName, Item: { ...rest, status: st, turn: tn, updated_at: ua } }));
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items).toEqual([expect.objectContaining({ id: runId, status: 'waiting_for_input', turn: 1 })]);
    await executeTurn(engine, { tenant, workflowId, runId, runInput: answer });
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items).toEqual([expect.objectContaining({ id: runId, status: 'completed', turn: 2 })]);
  });
});

/** Past the expiry of a session idle for its whole TTL of 60 s, slack included (sessionExpiry). */
const PAST_TTL_MS = sessionExpiry(0, 60) * 1000 + 1000;

describe('session deletion and expiry', () => {
  it('deletes every item of a session but its marked head and the tombstone closing its next turn, which expire in a day', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' } });
    const runId = first.response.run_id;
    await executeTurn(engine, { tenant, workflowId, runId, runInput: { inputs: { name: 'A', age: 3, plan: 'free' } } });
    expect((await itemsOf(tenant, runId)).length).toBe(3);
    const before = Math.floor(Date.now() / 1000);
    await deleteSession(engine.store, tenant, runId);
    expect(await itemsOf(tenant, runId)).toEqual([keys.turn(3), 'T#~']);
    const { doc, tableName } = testTable();
    for (const sk of [keys.turn(3), 'T#~']) {
      const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: { pk: keys.session(tenant, runId), sk } }));
      expect(Item?.ttl).toBeGreaterThanOrEqual(before + DELETED_SESSION_TTL_SECONDS);
      expect(Item?.ttl).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + DELETED_SESSION_TTL_SECONDS);
      // out of the listing and timer indexes
      expect(Item?.gsi1pk).toBeUndefined();
    }
    await expect(loadSession(engine.store, tenant, runId, 1)).rejects.toBeInstanceOf(NotFoundError);
    await expect(getHead(engine.store, tenant, runId)).rejects.toBeInstanceOf(NotFoundError);
    expect(await getTurn(engine.store, tenant, runId, 3)).toBeNull();
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items).toEqual([]);
    await expect(deleteSession(engine.store, tenant, runId)).resolves.toBeUndefined();
    await expect(deleteSession(engine.store, tenant, newRunId())).rejects.toBeInstanceOf(NotFoundError);
  });

  it('refuses a commit into a session that expired since it was read, and a claimless one resting on a read over an hour old', async () => {
    const tenant = newTenant();
    let now = Date.now();
    const store = { ...testStore(), now: () => now };
    const clocked = { ...engine, store, clock: () => now };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const runId = (await executeTurn(clocked, { tenant, workflowId, runInput: { query: 'hi' } })).response.run_id;
    const late = (ms: number) => ({ beforeCommit: () => void (now += ms) });
    await expect(executeTurn(clocked, { tenant, workflowId, runId, runInput: { inputs: {} }, hooks: late(MAX_SLOT_READ_AGE_MS + 1) })).rejects.toMatchObject({ code: 'unavailable' });
    expect(await itemsOf(tenant, runId)).toEqual([keys.turn(1), 'T#~']);
    // an hour on, this turn refreshes the head's listing, and with it the TTL: a minute
    const short = { ...clocked, sessionTtlSeconds: 60 };
    const second = await executeTurn(short, { tenant, workflowId, runId, runInput: { inputs: {} } });
    expect(second.response.turn_number).toBe(2);
    await expect(executeTurn(short, { tenant, workflowId, runId, runInput: { inputs: {} }, hooks: late(PAST_TTL_MS) })).rejects.toBeInstanceOf(NotFoundError);
    expect(await itemsOf(tenant, runId)).toEqual([keys.turn(1), keys.turn(2), 'T#~']);
    // a claimed commit too (a streamed turn claims before its first event): what is left is the claim, with its TTL
    now -= PAST_TTL_MS;
    await expect(executeTurn(short, { tenant, workflowId, runId, runInput: { inputs: {} }, onEvent: () => undefined, hooks: late(PAST_TTL_MS) })).rejects.toBeInstanceOf(NotFoundError);
    expect(await itemsOf(tenant, runId)).toEqual([keys.turn(1), keys.turn(2), keys.turn(3), 'T#~']);
    const { Item: claim } = await testTable().doc.send(new GetCommand({ TableName: testTable().tableName, Key: { pk: keys.session(tenant, runId), sk: keys.turn(3) } }));
    expect(claim).toMatchObject({ kind: 'claim', ttl: expect.any(Number) });
  });

  it('ignores an expired session in reads and listings before DynamoDB removes it', async () => {
    const tenant = newTenant();
    // the clock is the test's: the session expires when the test says, however slow the machine
    let at = Date.now();
    const clock = () => at;
    const clocked = { ...engine, store: { ...engine.store, now: clock }, clock, sessionTtlSeconds: 60 };
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const { head } = await createRun(clocked, { tenant, workflowId });
    expect((await listSessions(clocked.store, tenant, workflowId, { limit: 5 })).items).toHaveLength(1);
    at += PAST_TTL_MS;
    await expect(loadSession(clocked.store, tenant, head.id, 1)).rejects.toBeInstanceOf(NotFoundError);
    await expect(executeTurn(clocked, { tenant, workflowId, runId: head.id, runInput: {} })).rejects.toBeInstanceOf(NotFoundError);
    expect((await listSessions(clocked.store, tenant, workflowId, { limit: 5 })).items).toHaveLength(0);
  });

  it('cascades a removed head to the rest of its partition through the table stream', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' } });
    const runId = first.response.run_id;
    expect((await itemsOf(tenant, runId)).length).toBe(2);

    const { client, doc, tableName, endpoint } = testTable();
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    const streams = new DynamoDBStreamsClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
    const iterators = await Promise.all(
      (StreamDescription?.Shards ?? []).map(async (shard) =>
        (await streams.send(new GetShardIteratorCommand({ StreamArn: Table?.LatestStreamArn, ShardId: shard.ShardId, ShardIteratorType: 'LATEST' }))).ShardIterator,
      ),
    );
    // the head goes (as TTL would remove it); its turn record is left behind
    await doc.send(new DeleteCommand({ TableName: tableName, Key: { pk: keys.session(tenant, runId), sk: 'T#~' } }));

    const records: DynamoDBStreamEvent['Records'] = [];
    for (let attempt = 0; attempt < 20 && records.length === 0; attempt++) {
      for (const iterator of iterators) {
        if (!iterator) continue;
        const out = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
        records.push(...((out.Records ?? []) as unknown as DynamoDBStreamEvent['Records']));
      }
      if (records.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const ours = records.filter((r) => r.dynamodb?.Keys?.pk?.S === keys.session(tenant, runId));
    expect(ours.map((r) => r.eventName)).toEqual(['REMOVE']);
    const result = await handler({ Records: ours });
    expect(result.batchItemFailures).toEqual([]);
    expect(await itemsOf(tenant, runId)).toEqual([]);
    streams.destroy();
  });
});

describe('turn records written in earlier layouts', () => {
  /** The run's first turn record, its parts, and a way to put it back rewritten. */
  async function firstRecord() {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-intake'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: {} });
    const runId = first.response.run_id;
    const { doc, tableName } = testTable();
    const key = { pk: keys.session(tenant, runId), sk: keys.turn(1) };
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: key }));
    const record = Item as Record<string, unknown>;
    expect(record.z).toBeInstanceOf(Uint8Array);
    expect(record.p).toBeUndefined();
    const parts = partsOf(record, ['s', 'h', 'q', 'r'], new Map());
    const { z: _z, ...rest } = record;
    const rewrite = (attributes: Record<string, unknown>) => doc.send(new PutCommand({ TableName: tableName, Item: { ...rest, ...attributes } }));
    return { tenant, workflowId, runId, first, parts, rewrite };
  }

  async function readsAndGoesOn(r: Awaited<ReturnType<typeof firstRecord>>) {
    const turn = await getTurn(engine.store, r.tenant, r.runId, 1);
    expect(turn?.response).toBe(r.first.body);
    const loaded = await loadSession(engine.store, r.tenant, r.runId, 5);
    expect(loaded.latest?.state).toEqual(r.parts.s);
    const second = await executeTurn(engine, { tenant: r.tenant, workflowId: r.workflowId, runId: r.runId, turnNumber: 1, runInput: { inputs: {} } });
    expect(second.response.turn_number).toBe(2);
  }

  it('are read as they were stored: an attribute a part', async () => {
    const r = await firstRecord();
    await r.rewrite({ s: encode(r.parts.s).bytes, h: encode(r.parts.h).bytes, q: encode(r.parts.q).bytes, r: encode(r.parts.r).bytes });
    await readsAndGoesOn(r);
  });

  it('are read as they were stored: one brotli stream of the parts, the response as text', async () => {
    const r = await firstRecord();
    await r.rewrite({ p: encodeParts({ s: r.parts.s, h: r.parts.h, q: r.parts.q, r: r.parts.r }, {}, 'brotli').bytes });
    await readsAndGoesOn(r);
  });

  it('give their state as stored, without its blobs, in either stream layout', async () => {
    const r = await firstRecord();
    const date = (r.parts.s as { globals: Record<string, unknown> }).globals['sys.date'];
    expect(date).toEqual(expect.any(String));
    const { doc, tableName } = testTable();
    const read = async () => (await doc.send(new GetCommand({ TableName: tableName, Key: { pk: keys.session(r.tenant, r.runId), sk: keys.turn(1) } }))).Item as Record<string, unknown>;
    expect(rawStateOf(await read())?.globals).toMatchObject({ 'sys.date': date });
    await r.rewrite({ p: encodeParts({ s: r.parts.s, h: r.parts.h, q: r.parts.q, r: r.parts.r }, {}, 'brotli').bytes });
    expect(rawStateOf(await read())?.globals).toMatchObject({ 'sys.date': date });
  });
});
