import { describe, expect, it } from 'vitest';
import { findApiKey, getApiKey, hashSecret, listApiKeys, putApiKey, revokeApiKey } from '../../lib/store/api-keys';
import { NotFoundError } from '../../lib/store/errors';
import { newTenant, testStore } from '../helpers/engine';

describe('API keys', () => {
  it('stores only a hash, finds a key by its secret, lists per tenant and honours revocation', async () => {
    const store = testStore();
    const tenant = newTenant();
    const secret = `s3cret-${tenant}-0123456789abcdef`;
    const key = { tenant, id: 'k1', name: 'embed', scope: 'execute' as const, workflowIds: ['wf1'], createdAt: '2026-11-30T00:00:00.000Z' };
    expect(await putApiKey(store, { ...key, secretHash: hashSecret(secret) })).toBe(true);
    // the same secret cannot be registered twice
    expect(await putApiKey(store, { ...key, id: 'k2', secretHash: hashSecret(secret) })).toBe(false);
    expect(await findApiKey(store, secret)).toMatchObject({ tenant, id: 'k1', scope: 'execute', workflowIds: ['wf1'], revokedAt: null });
    expect(await findApiKey(store, `${secret}x`)).toBeNull();
    const listed = await listApiKeys(store, tenant);
    expect(listed.map((k) => k.id)).toEqual(['k1']);
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect(await listApiKeys(store, newTenant())).toEqual([]);
    await revokeApiKey(store, tenant, 'k1');
    expect(await findApiKey(store, secret)).toBeNull();
    expect((await getApiKey(store, tenant, 'k1')).revokedAt).not.toBeNull();
    await expect(revokeApiKey(store, tenant, 'nope')).rejects.toBeInstanceOf(NotFoundError);
    await expect(revokeApiKey(store, newTenant(), 'k1')).rejects.toBeInstanceOf(NotFoundError);
  });
});
