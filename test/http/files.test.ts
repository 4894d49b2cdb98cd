import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

let api: Served;
beforeAll(async () => {
  api = await serveApp(testEngine(), { maxFileBytes: 64 * 1024 });
});
afterAll(async () => {
  await api.close();
});

async function upload(key: string, name: string, type: string, content: string | Uint8Array) {
  const form = new FormData();
  form.append('file', new Blob([content], { type }), name);
  const res = await fetch(`${api.url}/workflows/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  return { status: res.status, json: (await res.json()) as any };
}

const fileWorkflow = graph({
  begin: ['Begin', {}, ['UserFillUp:Doc']],
  'UserFillUp:Doc': ['UserFillUp', { inputs: { doc: { name: 'Document', type: 'file', optional: false } } }, ['Message:Show']],
  'Message:Show': ['Message', { content: ['{UserFillUp:Doc@doc.name} ({UserFillUp:Doc@doc.size} bytes): {UserFillUp:Doc@doc.text}'] }],
});

describe('file inputs', () => {
  it('answers a file field with an uploaded file, its text extracted', async () => {
    const stored = await upload(api.adminKey, 'notes.txt', 'text/plain', 'hello from a file');
    expect(stored.status).toBe(201);
    expect(stored.json).toMatchObject({ file_id: expect.stringMatching(/^file_[0-9a-f]{32}$/), name: 'notes.txt', size: 17, mime_type: 'text/plain' });
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'files', dsl: fileWorkflow } })).json.id;
    const t1 = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'here' } } });
    expect(t1.json.next_input_hint.inputs.doc.type).toBe('file');
    const t2 = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: t1.json.run_id, run_input: { inputs: { doc: stored.json.file_id } } } });
    expect(t2.json.status).toBe('completed');
    expect(t2.json.outputs.content).toBe('notes.txt (17 bytes): hello from a file');
  });

  it('refuses oversize uploads, and file ids of another tenant or none', async () => {
    const big = await upload(api.adminKey, 'big.bin', 'application/octet-stream', new Uint8Array(65 * 1024));
    expect(big.status).toBe(413);
    expect(big.json.code).toBe('payload_too_large');

    const strangerKey = await api.addKey(newTenant(), 'admin');
    const theirs = await upload(strangerKey, 'secret.txt', 'text/plain', 'not yours');
    expect((await api.call('GET', `/workflows/v1/files/${theirs.json.file_id}`)).status).toBe(404);
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'files', dsl: fileWorkflow } })).json.id;
    const t1 = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'x' } } });
    for (const doc of [theirs.json.file_id, `file_${'0'.repeat(32)}`, 'not-a-file-id']) {
      const res = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: t1.json.run_id, run_input: { inputs: { doc } } } });
      expect(res.status).toBe(422);
      expect(res.json).toMatchObject({ code: 'invalid_inputs', fields: [{ field: 'doc', component_id: 'UserFillUp:Doc' }] });
    }
  });

  it('lets an execute key upload, and deletes files', async () => {
    const executeKey = await api.addKey(api.tenant, 'execute', ['wf_any']);
    const stored = await upload(executeKey, 'a.json', 'application/json', '{"a":1}');
    expect(stored.status).toBe(201);
    expect((await api.call('DELETE', `/workflows/v1/files/${stored.json.file_id}`)).status).toBe(204);
    expect((await api.call('GET', `/workflows/v1/files/${stored.json.file_id}`)).status).toBe(404);
  });
});
