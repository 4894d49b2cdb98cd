/**
 * The lease and checkpoints of async turns, at the store: a worker presumed dead and taken over
 * can write nothing more (no checkpoint, no renewal, no commit), a pending stop refuses
 * checkpoints and ordinary commits, and a follower's cursor reads each event exactly once.
 */
import { randomBytes } from 'node:crypto';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import {
  acquireLease,
  type Lease,
  loadCheckpoint,
  releaseLease,
  renewLease,
  requestCancel,
  saveCheckpoint,
} from '../../lib/store/checkpoints';
import { encode } from '../../lib/store/codec';
import { CancelRequestedError, LeaseLostError, NotFoundError, TurnInProgressError } from '../../lib/store/errors';
import { keys } from '../../lib/store/item-keys';
import { claimTurn, commitTurn, createSession, getHead, getTurn, type SessionHead } from '../../lib/store/sessions';
import { parseCursor, readTurnEvents } from '../../lib/turns/progress';
import { newTenant, testEngine } from '../helpers/engine';

const engine = testEngine();
const store = engine.store;
const LEASE_MS = 60_000;
const TIMES = { leaseMs: LEASE_MS, holdMs: 20 * 60_000 };

async function claimedRun(options: { async?: boolean } = {}): Promise<{ head: SessionHead; token: string }> {
  const token = randomBytes(16).toString('hex');
  const head = await createSession(store, {
    tenant: newTenant(),
    id: randomBytes(16).toString('hex'),
    workflowId: 'wf',
    version: 1,
    userId: null,
    ttlSeconds: 3600,
  });
  head.claim = await claimTurn(store, head, token, LEASE_MS, options.async === false ? {} : { async: true });
  return { head, token };
}

const leaseOf = (head: SessionHead, token: string, owner: string): Lease => ({ tenant: head.tenant, id: head.id, turn: 1, token, owner });

/** The worker stopped renewing (it died) long enough ago for its lease to be over. */
async function expireLease(head: SessionHead): Promise<void> {
  await store.doc.send(new UpdateCommand({
    TableName: store.table,
    Key: { pk: keys.session(head.tenant, head.id), sk: keys.turn(1) },
    UpdateExpression: 'SET lease_expires = :past',
    ExpressionAttributeValues: { ':past': Date.now() - 1 },
  }));
}

const checkpoint = (label: string, events: unknown[], seq: number, from: number) => ({
  checkpoint: { label },
  events,
  seq,
  from,
  times: TIMES,
  ttlSeconds: 3600,
  storedBlobs: new Set<string>(),
});

function commitOf(head: SessionHead, token: string, lease: { owner: string; allowCancel: boolean }) {
  return {
    head,
    turn: 1,
    token,
    claim: { turn: 1, token, expiresAt: 0 },
    status: lease.allowCancel ? 'cancelled' : 'completed',
    payload: { state: {}, request: {}, response: '{"events":[]}', history: [] },
    keyHash: null,
    fingerprint: null,
    ttlSeconds: 3600,
    dueAt: null,
    storedBlobs: new Set<string>(),
    lease,
  };
}

describe('the lease of an async turn', () => {
  it('fences a worker presumed dead: once taken over it can neither checkpoint, renew, let go nor commit', async () => {
    const { head, token } = await claimedRun();
    const a = leaseOf(head, token, 'worker-a');
    const b = leaseOf(head, token, 'worker-b');
    await acquireLease(store, a, TIMES);
    await acquireLease(store, a, TIMES); // its own lease again: fine
    await expect(acquireLease(store, b, TIMES)).rejects.toBeInstanceOf(TurnInProgressError);
    await saveCheckpoint(store, a, checkpoint('a1', [{ event: 'x', data: 1 }], 1, 0));

    await expireLease(head);
    // the worker is presumed dead, but the claim is kept for its message: no other request gets the turn
    await expect(claimTurn(store, await getHead(store, head.tenant, head.id), 'd'.repeat(32), LEASE_MS)).rejects.toBeInstanceOf(TurnInProgressError);
    await acquireLease(store, b, TIMES);
    await expect(saveCheckpoint(store, a, checkpoint('a2', [{ event: 'x', data: 2 }], 2, 1))).rejects.toBeInstanceOf(LeaseLostError);
    await expect(renewLease(store, a, TIMES)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(releaseLease(store, a, LEASE_MS)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(commitTurn(store, commitOf(head, token, { owner: 'worker-a', allowCancel: false }))).rejects.toBeInstanceOf(LeaseLostError);
    expect(await getTurn(store, head.tenant, head.id, 1)).toBeNull();

    // the successor goes on from what the first one checkpointed
    const saved = await loadCheckpoint(store, head.tenant, head.id, 1, token);
    expect(saved).toMatchObject({ checkpoint: { label: 'a1' }, events: [{ event: 'x', data: 1 }], seq: 1 });
    await saveCheckpoint(store, b, checkpoint('b2', [{ event: 'y', data: 2 }], 2, 1));
    expect(await loadCheckpoint(store, head.tenant, head.id, 1, token)).toMatchObject({ checkpoint: { label: 'b2' }, events: [{ event: 'x', data: 1 }, { event: 'y', data: 2 }], seq: 2 });
    // another claim's checkpoint is not this one's
    expect(await loadCheckpoint(store, head.tenant, head.id, 1, 'f'.repeat(32))).toBeNull();

    await commitTurn(store, commitOf(head, token, { owner: 'worker-b', allowCancel: false }));
    expect((await getHead(store, head.tenant, head.id)).claim).toBeNull();
    // the claim is gone: a late delivery finds the turn lost to it
    await expect(acquireLease(store, b, TIMES)).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('a pending stop refuses checkpoints and ordinary commits, and is reported by the heartbeat', async () => {
    const { head, token } = await claimedRun();
    const lease = leaseOf(head, token, 'worker');
    await acquireLease(store, lease, TIMES);
    expect(await renewLease(store, lease, TIMES)).toEqual({ cancelRequested: false });
    expect(await requestCancel(store, head, 'e'.repeat(32))).toBe(false); // not the claim in flight
    expect(await requestCancel(store, head, token)).toBe(true);
    expect(await renewLease(store, lease, TIMES)).toEqual({ cancelRequested: true });
    await expect(saveCheckpoint(store, lease, checkpoint('c', [], 0, 0))).rejects.toBeInstanceOf(CancelRequestedError);
    await expect(commitTurn(store, commitOf(head, token, { owner: 'worker', allowCancel: false }))).rejects.toBeInstanceOf(CancelRequestedError);
    await commitTurn(store, commitOf(head, token, { owner: 'worker', allowCancel: true }));
    const after = await getHead(store, head.tenant, head.id);
    expect(after).toMatchObject({ turn: 1, status: 'cancelled', claim: null });
  });

  it('a stop cannot flag a sync turn, and a run that is gone is not found', async () => {
    const { head, token } = await claimedRun({ async: false });
    expect(await requestCancel(store, head, token)).toBe(false);
    await expect(acquireLease(store, { tenant: head.tenant, id: randomBytes(16).toString('hex'), turn: 1, token, owner: 'w' }, TIMES)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('following a turn in progress', () => {
  it('reads each event exactly once from every cursor it hands out, inside event items too', async () => {
    const { head, token } = await claimedRun();
    const lease = leaseOf(head, token, 'worker');
    await acquireLease(store, lease, TIMES);
    const all = Array.from({ length: 9 }, (_, i) => ({ event: 'e', data: i }));
    // three event items of 2, 3 and 4 events, and a checkpoint with no new events in between
    await saveCheckpoint(store, lease, checkpoint('1', all.slice(0, 2), 1, 0));
    await saveCheckpoint(store, lease, checkpoint('1b', [], 1, 2));
    await saveCheckpoint(store, lease, checkpoint('2', all.slice(2, 5), 2, 2));
    await saveCheckpoint(store, lease, checkpoint('3', all.slice(5, 9), 3, 5));

    const whole = await readTurnEvents(engine, head.tenant, head.id, 1, parseCursor(undefined));
    expect(whole).toMatchObject({ status: 'running', committed: false, events: all, next_cursor: '3.9' });
    expect(whole.cursors).toHaveLength(9);
    for (const [k, cursor] of whole.cursors.entries()) {
      const rest = await readTurnEvents(engine, head.tenant, head.id, 1, parseCursor(cursor));
      expect(rest.events).toEqual(all.slice(k + 1));
    }
    await expect(readTurnEvents(engine, head.tenant, head.id, 2, parseCursor(undefined))).rejects.toBeInstanceOf(NotFoundError);
    expect(() => parseCursor('1.2.3')).toThrow(/cursor/);
  });
});

describe('claims written before checkpoints were deflated with the record dictionary', () => {
  it('are read, followed and taken over; the successor writes the dictionary codec and drops the old checkpoint', async () => {
    const { head, token } = await claimedRun();
    const key = { pk: keys.session(head.tenant, head.id), sk: keys.turn(1) };
    const old = leaseOf(head, token, 'worker-old');
    await acquireLease(store, old, TIMES);
    // what the previous release wrote: brotli in `cs` and `ev<seq>`
    const first = [{ event: 'e', data: 0 }, { event: 'e', data: 1 }];
    await store.doc.send(new UpdateCommand({
      TableName: store.table,
      Key: key,
      UpdateExpression: 'SET cs = :cs, cseq = :seq, ev000001 = :ev',
      ExpressionAttributeValues: { ':cs': encode({ label: 'old' }).bytes, ':seq': 1, ':ev': encode({ from: 0, events: first }).bytes },
    }));
    expect(await loadCheckpoint(store, head.tenant, head.id, 1, token)).toMatchObject({ checkpoint: { label: 'old' }, events: first, seq: 1 });

    await expireLease(head);
    const next = leaseOf(head, token, 'worker-new');
    await acquireLease(store, next, TIMES);
    const second = [{ event: 'e', data: 2 }];
    await saveCheckpoint(store, next, checkpoint('new', second, 2, 2));
    expect(await loadCheckpoint(store, head.tenant, head.id, 1, token)).toMatchObject({ checkpoint: { label: 'new' }, events: [...first, ...second], seq: 2 });
    const whole = await readTurnEvents(engine, head.tenant, head.id, 1, parseCursor(undefined));
    expect(whole.events).toEqual([...first, ...second]);

    const { Item } = await store.doc.send(new GetCommand({ TableName: store.table, Key: key, ConsistentRead: true }));
    expect(Item).not.toHaveProperty('cs');
    expect(Item?.ck).toBeInstanceOf(Uint8Array);
    expect(Item?.ev000001).toBeInstanceOf(Uint8Array);
    expect(Item?.ew000002).toBeInstanceOf(Uint8Array);
  });
});
