import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalKeyFile, MasterKeys } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

let api: Served;
let dir: string;
let secrets: TenantSecrets;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'easel-secrets-api-'));
  const engine = testEngine();
  secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new LocalKeyFile(join(dir, 'master-key.json'))) });
  api = await serveApp(engine, { secrets });
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

const VALUE = 'sk-value-never-returned-7731';

describe('/workflows/v1/secrets', () => {
  it('puts (201, then 200 on replace), lists names and times only, deletes (204, then 404)', async () => {
    const made = await api.call('PUT', '/workflows/v1/secrets/CRM_TOKEN', { body: { value: VALUE } });
    expect(made.status).toBe(201);
    expect(made.json).toEqual({ name: 'CRM_TOKEN', created_at: expect.any(String), updated_at: made.json.created_at });
    const replaced = await api.call('PUT', '/workflows/v1/secrets/CRM_TOKEN', { body: { value: `${VALUE}-2` } });
    expect(replaced.status).toBe(200);
    expect(replaced.json.created_at).toBe(made.json.created_at);
    await api.call('PUT', '/workflows/v1/secrets/_other', { body: { value: 'x' } });

    const listed = await api.call('GET', '/workflows/v1/secrets');
    expect(listed.status).toBe(200);
    expect(listed.json.items.map((s: { name: string }) => s.name)).toEqual(['CRM_TOKEN', '_other']);
    expect(Object.keys(listed.json.items[0]).sort()).toEqual(['created_at', 'name', 'updated_at']);
    expect(listed.text).not.toContain(VALUE);
    expect(await secrets.get(api.tenant, 'CRM_TOKEN')).toBe(`${VALUE}-2`);

    expect((await api.call('DELETE', '/workflows/v1/secrets/CRM_TOKEN')).status).toBe(204);
    const again = await api.call('DELETE', '/workflows/v1/secrets/CRM_TOKEN');
    expect(again.status).toBe(404);
    expect(again.json.code).toBe('not_found');
    expect((await api.call('GET', '/workflows/v1/secrets')).json.items.map((s: { name: string }) => s.name)).toEqual(['_other']);
  });

  it('answers validation errors with a stable code naming the field', async () => {
    const cases: [string, unknown, number, string, string][] = [
      ['9STARTS_WITH_DIGIT', { value: 'x' }, 400, 'invalid_request', 'name'],
      ['has-dash', { value: 'x' }, 400, 'invalid_request', 'name'],
      [`A${'b'.repeat(64)}`, { value: 'x' }, 400, 'invalid_request', 'name'],
      ['OK_NAME', {}, 400, 'invalid_request', 'value'],
      ['OK_NAME', { value: '' }, 400, 'invalid_request', 'value'],
      ['OK_NAME', { value: 42 }, 400, 'invalid_request', 'value'],
      ['OK_NAME', { value: 'x', extra: 1 }, 400, 'invalid_request', 'extra'],
      ['OK_NAME', { value: 'é'.repeat(4097) }, 413, 'payload_too_large', 'value'],
    ];
    for (const [name, body, status, code, field] of cases) {
      const res = await api.call('PUT', `/workflows/v1/secrets/${name}`, { body });
      expect([name, res.status, res.json.code]).toEqual([name, status, code]);
      expect(res.json.fields.map((f: { field: string }) => f.field)).toContain(field);
      expect(res.json.error).toMatch(field ? new RegExp(`^${field}: `) : /./);
    }
    expect((await api.call('PUT', '/workflows/v1/secrets/OK_NAME', { raw: '{"value": ' })).json.code).toBe('invalid_request');
    expect((await api.call('PUT', '/workflows/v1/secrets/OK_NAME', { body: { value: 'é'.repeat(4096) } })).status).toBe(201);
    expect((await api.call('DELETE', '/workflows/v1/secrets/bad-name')).json).toMatchObject({ code: 'invalid_request', fields: [{ field: 'name' }] });
  });

  it('is for admin keys: execute keys get 403, no key 401, another tenant sees nothing of it', async () => {
    await api.call('PUT', '/workflows/v1/secrets/ADMIN_ONLY', { body: { value: VALUE } });
    const execute = await api.addKey(api.tenant, 'execute', ['any']);
    for (const [method, path, body] of [
      ['PUT', '/workflows/v1/secrets/ADMIN_ONLY', { value: 'overwrite' }],
      ['GET', '/workflows/v1/secrets', undefined],
      ['DELETE', '/workflows/v1/secrets/ADMIN_ONLY', undefined],
    ] as const) {
      const res = await api.call(method, path, { key: execute, ...(body ? { body } : {}) });
      expect([method, res.status, res.json.code]).toEqual([method, 403, 'forbidden']);
      expect((await api.call(method, path, { key: null, ...(body ? { body } : {}) })).status).toBe(401);
    }
    expect(await secrets.get(api.tenant, 'ADMIN_ONLY')).toBe(VALUE);
    const other = await api.addKey(`${api.tenant}x`, 'admin');
    expect((await api.call('GET', '/workflows/v1/secrets', { key: other })).json.items).toEqual([]);
    expect((await api.call('DELETE', '/workflows/v1/secrets/ADMIN_ONLY', { key: other })).status).toBe(404);
    expect(await secrets.get(api.tenant, 'ADMIN_ONLY')).toBe(VALUE);
  });

  it('is in the OpenAPI document', async () => {
    const doc = await api.call('GET', '/openapi.json', { key: null });
    expect(Object.keys(doc.json.paths)).toEqual(expect.arrayContaining(['/workflows/v1/secrets', '/workflows/v1/secrets/{name}']));
    expect(Object.keys(doc.json.paths['/workflows/v1/secrets/{name}']).sort()).toEqual(['delete', 'put']);
  });

  it('answers 503 when the server has no tenant secrets configured', async () => {
    const bare = await serveApp(testEngine());
    const res = await bare.call('GET', '/workflows/v1/secrets');
    expect([res.status, res.json.code]).toEqual([503, 'unavailable']);
    await bare.close();
  });
});
