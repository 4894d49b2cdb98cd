import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { cascadeRemovedHeads } from '../../lib/store/cleanup';
import { NotFoundError } from '../../lib/store/errors';
import { getFile, putFile, readFileContent } from '../../lib/store/files';
import { newTenant, testStore } from '../helpers/engine';

describe('stored files', () => {
  it('keeps large content in chunks, stores equal bytes once, and cascades expired content', async () => {
    const store = testStore();
    const tenant = newTenant();
    const bytes = new Uint8Array(700 * 1024).map((_, i) => (i * 7) % 251);
    const meta = (id: string) => ({ tenant, id, name: 'blob.bin', size: bytes.length, mimeType: 'application/octet-stream', createdAt: new Date().toISOString() });
    const a = await putFile(store, meta(`file_${'a'.repeat(32)}`), bytes);
    const b = await putFile(store, meta(`file_${'b'.repeat(32)}`), bytes);
    expect(a.sha256).toBe(b.sha256);
    expect(Buffer.compare(await readFileContent(store, await getFile(store, tenant, b.id)), Buffer.from(bytes))).toBe(0);
    await expect(getFile(store, newTenant(), a.id)).rejects.toBeInstanceOf(NotFoundError);

    const pk = `T#${tenant}#FB#${a.sha256}`;
    const count = async () => (await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk } }))).Items?.length ?? 0;
    expect(await count()).toBe(4); // the index item and three 300 KB chunks
    const result = await cascadeRemovedHeads(store, [{ id: 'r1', pk, sk: 'C' }]);
    expect(result).toEqual({ failed: [], deleted: 4 });
    expect(await count()).toBe(0);
  });
});
