import { describe, expect, it } from 'vitest';
import { hashSecret, listApiKeys, putApiKey, revokeApiKey, verifyApiKey } from '../../lib/store/api-keys';
import { NotFoundError } from '../../lib/store/errors';
import { newTenant, testStore } from '../helpers/engine';

describe('API keys', () => {
  it('stores only a hash, verifies the secret, lists per tenant and honours revocation', async () => {
    const store = testStore();
    const tenant = newTenant();
    const secret = 's3cret-value-of-a-key-0123456789abcdef';
    await putApiKey(store, { tenant, id: 'k1', name: 'embed', scope: 'execute', workflowIds: ['wf1'], createdAt: '2026-11-30T00:00:00.000Z', secretHash: hashSecret(secret) });
    expect(await verifyApiKey(store, tenant, 'k1', secret)).toMatchObject({ scope: 'execute', workflowIds: ['wf1'], revokedAt: null });
    expect(await verifyApiKey(store, tenant, 'k1', `${secret}x`)).toBeNull();
    expect(await verifyApiKey(store, newTenant(), 'k1', secret)).toBeNull();
    const listed = await listApiKeys(store, tenant);
    expect(listed.map((k) => k.id)).toEqual(['k1']);
    expect(JSON.stringify(listed)).not.toContain(secret);
    await revokeApiKey(store, tenant, 'k1');
    expect(await verifyApiKey(store, tenant, 'k1', secret)).toBeNull();
    await expect(revokeApiKey(store, tenant, 'nope')).rejects.toBeInstanceOf(NotFoundError);
  });
});
