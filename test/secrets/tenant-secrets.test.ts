import { DeleteCommand, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { keyIdOf } from '../../lib/secrets/crypto';
import { MasterKeys, rotateKeyRing, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { keys } from '../../lib/store/item-keys';
import { listDataKeys, putSecret, retireDataKey } from '../../lib/store/secrets';
import { newTenant, testStore } from '../helpers/engine';

const DAY = 86_400_000;

function setup(options: { dataKeyCacheMs?: number } = {}) {
  let now = Date.parse('2026-12-01T00:00:00Z');
  const clock = { now: () => now, advance: (ms: number) => (now += ms) };
  const source = new StaticKeyRing();
  const master = new MasterKeys(source, clock.now);
  const store = testStore();
  const secrets = new TenantSecrets({ store, master, now: clock.now, ...options });
  return { store, source, master, secrets, clock, tenant: newTenant() };
}

async function itemsOf(tenant: string): Promise<Record<string, unknown>[]> {
  const store = testStore();
  const { Items } = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.tenant(tenant) }, ConsistentRead: true }));
  return Items ?? [];
}

describe('TenantSecrets', () => {
  it('stores ciphertext only, lists names and times, reads values back, deletes', async () => {
    const { secrets, tenant, clock } = setup();
    const made = await secrets.put(tenant, 'CRM_TOKEN', 'crm-value-0001');
    expect(made).toMatchObject({ name: 'CRM_TOKEN', created: true, createdAt: '2026-12-01T00:00:00.000Z' });
    clock.advance(1000);
    const replaced = await secrets.put(tenant, 'CRM_TOKEN', 'crm-value-0002');
    expect(replaced).toMatchObject({ created: false, createdAt: '2026-12-01T00:00:00.000Z', updatedAt: '2026-12-01T00:00:01.000Z' });
    await secrets.put(tenant, 'OTHER', 'other-value');
    expect(await secrets.get(tenant, 'CRM_TOKEN')).toBe('crm-value-0002');
    expect(await secrets.list(tenant)).toEqual([
      { name: 'CRM_TOKEN', createdAt: '2026-12-01T00:00:00.000Z', updatedAt: '2026-12-01T00:00:01.000Z' },
      { name: 'OTHER', createdAt: '2026-12-01T00:00:01.000Z', updatedAt: '2026-12-01T00:00:01.000Z' },
    ]);
    const stored = JSON.stringify(await itemsOf(tenant));
    expect(stored).not.toContain('crm-value');
    expect(stored).not.toContain(Buffer.from('crm-value-0002').toString('base64'));
    expect(stored).toContain('"ciphertext":"easel1.dk1.');
    expect(await secrets.delete(tenant, 'CRM_TOKEN')).toBe(true);
    expect(await secrets.delete(tenant, 'CRM_TOKEN')).toBe(false);
    expect(await secrets.get(tenant, 'CRM_TOKEN')).toBeUndefined();
    expect(await secrets.get(newTenant(), 'OTHER')).toBeUndefined();
  });

  it('refuses a ciphertext copied into another tenant (the associated data names the tenant)', async () => {
    const a = setup();
    const b = newTenant();
    await a.secrets.put(a.tenant, 'X', 'value-of-a');
    await a.secrets.put(b, 'X', 'value-of-b');
    const stored = (await itemsOf(a.tenant)).find((i) => i.sk === keys.secret('X'));
    const store = testStore();
    await store.doc.send(new PutCommand({ TableName: store.table, Item: { ...stored, pk: keys.tenant(b) } }));
    await expect(a.secrets.get(b, 'X')).rejects.toThrow(/does not open/);
  });

  it('rotates the master key: the old key opens until re-wrapped, reads re-wrap lazily, rewrapAll does the rest', async () => {
    const { secrets, source, master, tenant, clock, store } = setup({ dataKeyCacheMs: 0 });
    const other = newTenant();
    await secrets.put(tenant, 'A', 'value-a');
    await secrets.put(other, 'B', 'value-b');
    const oldId = source.ring.current.id;
    source.ring = rotateKeyRing(source.ring, { now: clock.now(), acceptPreviousMs: 7 * DAY });
    const wrappedBy = async (t: string) => (await listDataKeys(store, t)).map((k) => keyIdOf(k.wrapped));
    expect(await wrappedBy(tenant)).toEqual([oldId]);
    // a read opens with the previous key and re-wraps under the current one
    expect(await secrets.get(tenant, 'A')).toBe('value-a');
    expect(await wrappedBy(tenant)).toEqual([source.ring.current.id]);
    // the rest, at once (the other tenant's key too; keys of other tests' rings are not ours to open)
    expect((await secrets.rewrapAll()).rewrapped).toBeGreaterThanOrEqual(1);
    expect(await secrets.rewrapTenant(other)).toEqual({ rewrapped: 0, unreadable: 0 });
    expect(await wrappedBy(other)).toEqual([source.ring.current.id]);
    // past the old key's time, nothing depends on it any more
    clock.advance(7 * DAY + 1);
    expect((await master.ring()).previous).toEqual([]);
    expect(await secrets.get(other, 'B')).toBe('value-b');
  });

  it('past its time the previous master key no longer opens a data key it wrapped', async () => {
    const { secrets, source, tenant, clock } = setup({ dataKeyCacheMs: 0 });
    await secrets.put(tenant, 'A', 'value-a');
    source.ring = rotateKeyRing(source.ring, { now: clock.now(), acceptPreviousMs: DAY });
    clock.advance(DAY + 1);
    await expect(secrets.get(tenant, 'A')).rejects.toThrow(/no longer accepted/);
  });

  it('rotates a tenant data key: every value re-encrypted under the new version, the old key deleted, writes use the new one', async () => {
    const { secrets, tenant, store } = setup();
    await secrets.put(tenant, 'A', 'value-a');
    await secrets.put(tenant, 'B', 'value-b');
    expect(await secrets.rotateDataKey(tenant)).toEqual({ version: 2, reencrypted: 2 });
    const items = await itemsOf(tenant);
    expect(items.filter((i) => i.kind === 'secret').map((i) => [i.name, i.data_key_version, keyIdOf(i.ciphertext as string)])).toEqual([
      ['A', 2, 'dk2'],
      ['B', 2, 'dk2'],
    ]);
    expect((await listDataKeys(store, tenant)).map((k) => k.version)).toEqual([2]);
    expect(await secrets.get(tenant, 'A')).toBe('value-a');
    await secrets.put(tenant, 'C', 'value-c');
    expect(items.length).toBe(3);
    expect((await itemsOf(tenant)).find((i) => i.name === 'C')?.data_key_version).toBe(2);
    // a fresh process (no cached keys) reads them all
    const fresh = new TenantSecrets({ store, master: secrets.master });
    expect(await Promise.all(['A', 'B', 'C'].map((n) => fresh.get(tenant, n)))).toEqual(['value-a', 'value-b', 'value-c']);
  });

  it('a write sealed with a data key a rotation retired meanwhile is refused by the store; put then seals with a newer key', async () => {
    const { secrets, tenant, store } = setup();
    await secrets.put(tenant, 'A', 'value-a');
    await retireDataKey(store, tenant, 1, new Date().toISOString());
    await expect(putSecret(store, tenant, { name: 'Z', ciphertext: 'easel1.dk1.AAAA', dataKeyVersion: 1, at: 'now' })).rejects.toThrow(/retired/);
    // no current key left: put makes the next version
    await secrets.put(tenant, 'Z', 'value-z');
    expect((await itemsOf(tenant)).find((i) => i.name === 'Z')?.data_key_version).toBe(2);
    expect(await secrets.get(tenant, 'A')).toBe('value-a');
  });

  it('keeps unwrapped data keys in memory for a while only', async () => {
    const { secrets, tenant, clock, store } = setup({ dataKeyCacheMs: 60_000 });
    await secrets.put(tenant, 'A', 'value-a');
    const dk = { pk: keys.tenant(tenant), sk: keys.secretDataKey(1) };
    const { Item } = await store.doc.send(new GetCommand({ TableName: store.table, Key: dk }));
    await store.doc.send(new DeleteCommand({ TableName: store.table, Key: dk }));
    expect(await secrets.get(tenant, 'A')).toBe('value-a'); // from the cache
    clock.advance(60_001);
    await expect(secrets.get(tenant, 'A')).rejects.toThrow(/missing/);
    await store.doc.send(new PutCommand({ TableName: store.table, Item }));
    expect(await secrets.get(tenant, 'A')).toBe('value-a');
  });
});
