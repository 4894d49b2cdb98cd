/**
 * `/workflows/v1/knowledge-bases` through the app on a real HTTP server, over the real knowledge
 * service on DynamoDB Local: validation naming fields, paging, documents parsed on upload (one
 * that fails shows FAIL with its reason and stops nothing else), the document cap, unsupported
 * types, deleting a document (its chunks leave the search), and admin keys only.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DOCUMENT_BYTES } from '../../lib/knowledge/limits';
import { endUserToken, makeEmbedSecret } from '../helpers/end-users';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { BROKEN_PDF, FAQ_TXT, GUIDE_MD, multipart, type Part } from '../helpers/knowledge-docs';

const BASE = '/workflows/v1/knowledge-bases';
let api: Served;

async function upload(kbId: string, parts: readonly Part[], query = '', key = api.adminKey) {
  const { body, type } = multipart(parts);
  const res = await fetch(`${api.url}${BASE}/${kbId}/documents${query}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': type }, body });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as any };
}

const create = (body: unknown, key?: string) => api.call('POST', BASE, { body, ...(key ? { key } : {}) });
const search = (kbId: string, body: Record<string, unknown>) => api.call('POST', `${BASE}/${kbId}/search`, { body: { similarity_threshold: 0, ...body } });

beforeAll(async () => {
  api = await serveApp(testEngine());
});
afterAll(async () => {
  await api?.close();
});

describe('knowledge bases', () => {
  it('are created with their settings and defaults, read, listed a page at a time, changed and deleted', async () => {
    const made = await create({ name: 'Handbook', description: 'The staff handbook', local: { chunking: { chunk_token_num: 256 } } });
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f]{32}$/),
      name: 'Handbook',
      backend: 'local',
      local: { chunking: { chunk_token_num: 256, delimiter: '\n', overlapped_percent: 0 } },
      aliases: [],
      document_count: 0,
      chunk_count: 0,
    });
    const remote = await create({ name: 'Remote', backend: 'ragflow', ragflow: { base_url: 'https://ragflow.example.com', api_key: '{secret.RAGFLOW_KEY}', dataset_ids: ['abc'] } });
    expect(remote.status).toBe(201);
    expect(remote.json).toMatchObject({ backend: 'ragflow', ragflow: { api_key: '{secret.RAGFLOW_KEY}', dataset_ids: ['abc'] } });
    await create({ name: 'Third' });

    expect((await api.call('GET', `${BASE}/${made.json.id}`)).json).toEqual(made.json);
    const first = await api.call('GET', `${BASE}?limit=2`);
    expect(first.json.items.map((k: { name: string }) => k.name)).toEqual(['Third', 'Remote']);
    const second = await api.call('GET', `${BASE}?limit=2&cursor=${first.json.next_cursor}`);
    expect(second.json).toMatchObject({ items: [{ name: 'Handbook' }], next_cursor: null });

    const patched = await api.call('PATCH', `${BASE}/${made.json.id}`, { body: { name: 'Staff handbook', aliases: ['a5aaec4a819b11f095f1047c16ec874f'], chunking: { delimiter: '\n\n' } } });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ name: 'Staff handbook', aliases: ['a5aaec4a819b11f095f1047c16ec874f'], local: { chunking: { chunk_token_num: 256, delimiter: '\n\n' } } });

    expect((await api.call('DELETE', `${BASE}/${remote.json.id}`)).status).toBe(204);
    expect((await api.call('GET', `${BASE}/${remote.json.id}`)).json).toEqual({ code: 'not_found', error: 'knowledge base not found' });
    expect((await api.call('DELETE', `${BASE}/${remote.json.id}`)).status).toBe(404);
  });

  it('refuse what does not validate, naming the field', async () => {
    const refused = async (body: unknown) => {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.code).toBe('invalid_request');
      return res.json as { field?: string; error: string };
    };
    expect((await refused({})).field).toBe('name');
    expect((await refused({ name: '   ' })).field).toBe('name');
    expect((await refused({ name: 'x', backend: 'elastic' })).field).toBe('backend');
    expect(await refused({ name: 'x', backend: 'ragflow' })).toMatchObject({ field: 'ragflow', error: 'ragflow: required when backend is "ragflow"' });
    expect((await refused({ name: 'x', ragflow: { base_url: 'https://r.example', api_key: '{secret.K}', dataset_ids: ['d'] } })).field).toBe('ragflow');
    expect((await refused({ name: 'x', local: { chunking: { chunk_token_num: 0 } } })).field).toBe('local.chunking.chunk_token_num');
    expect((await refused({ name: 'x', local: { chunking: { colour: 'red' } } })).field).toBe('local.chunking.colour');
    expect((await refused({ name: 'x', backend: 'ragflow', ragflow: { base_url: 'https://r.example', api_key: 'ragflow-literal-key', dataset_ids: ['d'] } })).field).toBe('ragflow.api_key');
    expect((await refused({ name: 'x', backend: 'bedrock', bedrock: { knowledge_base_id: 'lowercase1' } })).field).toBe('bedrock.knowledge_base_id');
    // what only the service knows: names are unique in the tenant, in any case
    await create({ name: 'Unique name' });
    expect(await refused({ name: 'UNIQUE NAME' })).toEqual({ code: 'invalid_request', field: 'name', error: 'name: a knowledge base named "UNIQUE NAME" exists already' });
    expect((await refused({ name: 'x', local: { embedding_model: 'nowhere:model' } })).field).toBe('local.embedding_model');

    expect((await api.call('GET', `${BASE}/not-an-id`)).json).toMatchObject({ code: 'invalid_request', field: 'id' });
    expect((await api.call('GET', `${BASE}?cursor=forged`)).json).toMatchObject({ code: 'invalid_request', field: 'cursor' });
    expect((await api.call('GET', `${BASE}?limit=0`)).json).toMatchObject({ code: 'invalid_request', field: 'limit' });
    const kb = (await create({ name: 'Patch target' })).json;
    expect((await api.call('PATCH', `${BASE}/${kb.id}`, { body: { backend: 'bedrock' } })).json).toMatchObject({ code: 'invalid_request', field: 'backend' });
    expect((await api.call('PATCH', `${BASE}/${kb.id}`, { raw: '{"name": ' })).json).toEqual({ code: 'invalid_request', error: 'the body is not valid JSON' });
    expect((await api.call('PATCH', `${BASE}/${kb.id}`, { raw: `${'{"a":'.repeat(70)}1${'}'.repeat(70)}` })).json).toMatchObject({ code: 'invalid_request', error: 'the JSON body nests deeper than 64 levels' });
    expect((await api.call('POST', `${BASE}/${kb.id}/search`, { body: { question: '' } })).json).toMatchObject({ code: 'invalid_request', field: 'question' });
    expect((await api.call('POST', `${BASE}/${kb.id}/documents/parse`, { body: { document_ids: [] } })).json).toMatchObject({ code: 'invalid_request', field: 'document_ids' });
  });
});

describe('the OpenAPI document', () => {
  it('describes every knowledge-base route', async () => {
    const doc = await api.call('GET', '/openapi.json', { key: null });
    const paths = Object.entries(doc.json.paths as Record<string, Record<string, unknown>>)
      .filter(([path]) => path.startsWith(BASE))
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`));
    expect(paths.sort()).toEqual([
      `DELETE ${BASE}/{id}`, `DELETE ${BASE}/{id}/documents/{doc}`,
      `GET ${BASE}`, `GET ${BASE}/{id}`, `GET ${BASE}/{id}/documents`, `GET ${BASE}/{id}/documents/{doc}`, `GET ${BASE}/{id}/documents/{doc}/chunks`,
      `PATCH ${BASE}/{id}`,
      `POST ${BASE}`, `POST ${BASE}/{id}/documents`, `POST ${BASE}/{id}/documents/parse`, `POST ${BASE}/{id}/search`,
    ].sort());
  });
});

describe('documents', () => {
  it('are parsed on upload: one that fails shows FAIL with its reason, the others are DONE and searchable', async () => {
    const kb = (await create({ name: 'Manuals', local: { chunking: { chunk_token_num: 32 } } })).json;
    const res = await upload(kb.id, [
      { name: 'guide.md', content: GUIDE_MD, type: 'text/markdown' },
      { name: 'broken.pdf', content: BROKEN_PDF, type: 'application/pdf' },
      { name: 'faq.txt', content: FAQ_TXT },
    ]);
    expect(res.status).toBe(201);
    const [guide, broken, faq] = res.json.items;
    expect(guide).toMatchObject({ name: 'guide.md', knowledge_base_id: kb.id, status: 'DONE', progress: 1, chunk_count: expect.any(Number), mime_type: 'text/markdown' });
    expect(guide.chunk_count).toBeGreaterThan(1);
    expect(faq).toMatchObject({ name: 'faq.txt', status: 'DONE', mime_type: 'text/plain' });
    expect(broken).toMatchObject({ name: 'broken.pdf', status: 'FAIL', chunk_count: 0 });
    expect(broken.progress_msg).not.toBe('');

    const listed = await api.call('GET', `${BASE}/${kb.id}/documents`);
    expect(listed.json.items.map((d: { name: string; status: string }) => [d.name, d.status])).toEqual([['faq.txt', 'DONE'], ['broken.pdf', 'FAIL'], ['guide.md', 'DONE']]);
    expect((await api.call('GET', `${BASE}/${kb.id}/documents?keywords=GUI`)).json.items.map((d: { name: string }) => d.name)).toEqual(['guide.md']);
    expect((await api.call('GET', `${BASE}/${kb.id}/documents/${broken.id}`)).json).toEqual(broken);
    expect((await api.call('GET', `${BASE}/${kb.id}`)).json).toMatchObject({ document_count: 3, chunk_count: guide.chunk_count + faq.chunk_count });

    const found = await search(kb.id, { question: 'How long is the warranty of the espresso machine?' });
    expect(found.status).toBe(200);
    expect(found.json.chunks[0]).toMatchObject({ doc_id: guide.id, docnm_kwd: 'guide.md', kb_id: kb.id, content_with_weight: expect.stringContaining('two years') });
    expect(found.json.doc_aggs).toContainEqual({ doc_id: guide.id, doc_name: 'guide.md', count: expect.any(Number) });
    const onlyFaq = await search(kb.id, { question: 'warranty', document_ids: [faq.id], top_n: 3 });
    expect(onlyFaq.json.chunks.map((c: { doc_id: string }) => c.doc_id)).toEqual([faq.id]);

    const chunks = await api.call('GET', `${BASE}/${kb.id}/documents/${guide.id}/chunks?limit=1`);
    expect(chunks.json.items).toEqual([expect.objectContaining({ document_id: guide.id, knowledge_base_id: kb.id, index: 0, content: expect.stringContaining('Espresso machine guide') })]);
    const rest = await api.call('GET', `${BASE}/${kb.id}/documents/${guide.id}/chunks?limit=1&cursor=${chunks.json.next_cursor}`);
    expect(rest.json.items[0].index).toBe(1);
    expect((await api.call('GET', `${BASE}/${kb.id}/documents/${guide.id}/chunks?keywords=citric`)).json.items.map((c: { content: string }) => c.content)).toEqual([expect.stringContaining('citric acid')]);
  });

  it('are stored unparsed with ?parse=false, then parsed in one call', async () => {
    const kb = (await create({ name: 'Later' })).json;
    const res = await upload(kb.id, [{ name: 'faq.txt', content: FAQ_TXT }, { name: 'guide.md', content: GUIDE_MD }], '?parse=false');
    expect(res.json.items.map((d: { status: string; progress: number }) => [d.status, d.progress])).toEqual([['UNSTART', 0], ['UNSTART', 0]]);
    expect((await search(kb.id, { question: 'refunds' })).json.chunks).toEqual([]);
    const parsed = await api.call('POST', `${BASE}/${kb.id}/documents/parse`, { body: { document_ids: res.json.items.map((d: { id: string }) => d.id) } });
    expect(parsed.status).toBe(200);
    expect(parsed.json.items.map((d: { status: string }) => d.status)).toEqual(['DONE', 'DONE']);
    expect((await search(kb.id, { question: 'refunds' })).json.chunks[0].content_with_weight).toContain('Refunds are paid');
    const missing = await api.call('POST', `${BASE}/${kb.id}/documents/parse`, { body: { document_ids: ['0'.repeat(32)] } });
    expect(missing.json).toEqual({ code: 'not_found', error: 'document not found' });
  });

  it('are refused past the document cap (413 naming it) and up to it taken', async () => {
    const kb = (await create({ name: 'Big' })).json;
    const atCap = await upload(kb.id, [{ name: 'cap.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES, 'a') }], '?parse=false');
    expect(atCap.status).toBe(201);
    expect(atCap.json.items[0]).toMatchObject({ size: MAX_DOCUMENT_BYTES, status: 'UNSTART' });
    const over = await upload(kb.id, [{ name: 'over.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES + 1, 'a') }]);
    expect(over.status).toBe(413);
    expect(over.json).toMatchObject({ code: 'payload_too_large', limit: MAX_DOCUMENT_BYTES });
    expect(over.json.error).toContain(String(MAX_DOCUMENT_BYTES));
    // several documents in one request share its cap
    const two = await upload(kb.id, [{ name: 'a.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES / 2 + 40_000, 'a') }, { name: 'b.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES / 2 + 40_000, 'b') }]);
    expect(two.status).toBe(413);
    expect(two.json.error).toContain(String(MAX_DOCUMENT_BYTES));
    expect((await api.call('GET', `${BASE}/${kb.id}/documents`)).json.items.map((d: { name: string }) => d.name)).toEqual(['cap.txt']);
  });

  it('of an unsupported type are refused with the supported ones named, and a request stores all its files or none', async () => {
    const kb = (await create({ name: 'Types' })).json;
    const res = await upload(kb.id, [{ name: 'faq.txt', content: FAQ_TXT }, { name: 'clip.mp4', content: '\u0000\u0000\u0000 ftypisom', type: 'video/mp4' }]);
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('invalid_request');
    expect(res.json.error).toMatch(/unsupported document type "\.mp4"; supported: .*\.pdf/);
    expect((await api.call('GET', `${BASE}/${kb.id}/documents`)).json.items).toEqual([]);
    expect((await upload(kb.id, [])).json).toMatchObject({ code: 'invalid_request', field: 'file' });
    const remote = (await create({ name: 'On RAGFlow', backend: 'ragflow', ragflow: { base_url: 'https://r.example', api_key: '{secret.K}', dataset_ids: ['d'] } })).json;
    expect((await upload(remote.id, [{ name: 'faq.txt', content: FAQ_TXT }])).json.error).toMatch(/its documents are managed there/);
  });

  it('deleted take their chunks along: searches no longer find them, the others stay', async () => {
    const kb = (await create({ name: 'Deletes' })).json;
    const [guide, faq] = (await upload(kb.id, [{ name: 'guide.md', content: GUIDE_MD }, { name: 'faq.txt', content: FAQ_TXT }])).json.items;
    expect((await search(kb.id, { question: 'refunds returns' })).json.chunks.map((c: { doc_id: string }) => c.doc_id)).toContain(faq.id);
    expect((await api.call('DELETE', `${BASE}/${kb.id}/documents/${faq.id}`)).status).toBe(204);
    const after = await search(kb.id, { question: 'refunds returns warranty' });
    expect(after.json.chunks.length).toBeGreaterThan(0);
    expect(after.json.chunks.every((c: { doc_id: string }) => c.doc_id === guide.id)).toBe(true);
    expect((await api.call('GET', `${BASE}/${kb.id}/documents/${faq.id}/chunks`)).status).toBe(404);
    expect((await api.call('DELETE', `${BASE}/${kb.id}/documents/${faq.id}`)).status).toBe(404);
    expect((await api.call('GET', `${BASE}/${kb.id}`)).json).toMatchObject({ document_count: 1, chunk_count: guide.chunk_count });
    // the knowledge base goes with all of it
    expect((await api.call('DELETE', `${BASE}/${kb.id}`)).status).toBe(204);
    expect((await search(kb.id, { question: 'warranty' })).status).toBe(404);
  });
});

describe('who may', () => {
  it('admin keys only: an execute key and an end-user token get 403 on every route, before anything is read', async () => {
    const kb = (await create({ name: 'Admins only' })).json;
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'w', dsl: fixture('form-intake') } })).json.id;
    const execute = await api.addKey(api.tenant, 'execute', [wf]);
    const embed = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);
    const endUser = endUserToken(embed, { sub: 'visitor', workflows: [wf] });
    const doc = '0'.repeat(32);
    const routes: [string, string, unknown?][] = [
      ['POST', BASE, { name: 'x' }],
      ['GET', BASE],
      ['GET', `${BASE}/${kb.id}`],
      ['PATCH', `${BASE}/${kb.id}`, { name: 'y' }],
      ['DELETE', `${BASE}/${kb.id}`],
      ['GET', `${BASE}/${kb.id}/documents`],
      ['POST', `${BASE}/${kb.id}/documents/parse`, { document_ids: [doc] }],
      ['GET', `${BASE}/${kb.id}/documents/${doc}`],
      ['DELETE', `${BASE}/${kb.id}/documents/${doc}`],
      ['GET', `${BASE}/${kb.id}/documents/${doc}/chunks`],
      ['POST', `${BASE}/${kb.id}/search`, { question: 'x' }],
    ];
    for (const [method, path, body] of routes) {
      for (const headers of [{}, { 'easel-end-user-token': endUser }] as Record<string, string>[]) {
        const res = await api.call(method, path, { key: execute, headers, ...(body !== undefined ? { body } : {}) });
        expect([method, path, res.status, res.json.code]).toEqual([method, path, 403, 'forbidden']);
      }
    }
    expect((await upload(kb.id, [{ name: 'faq.txt', content: FAQ_TXT }], '', execute)).status).toBe(403);
    expect((await api.call('GET', `${BASE}/${kb.id}`)).json.name).toBe('Admins only');
  });
});

describe('import warnings', () => {
  /** Begin -> Retrieval (naming `ids`) -> an Agent with a Retrieval tool in a sub-Agent (naming `toolIds`) -> Message. */
  const ragDsl = (ids: string[], toolIds: string[] = []) => graph({
    begin: ['Begin', { mode: 'conversational' }, ['Retrieval:Docs']],
    'Retrieval:Docs': ['Retrieval', { query: '{sys.query}', kb_ids: ids }, ['Agent:Answer']],
    'Agent:Answer': ['Agent', {
      llm_id: 'echo',
      sys_prompt: 'Answer from {Retrieval:Docs@formalized_content}',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      tools: toolIds.length === 0 ? [] : [{ component_name: 'Agent', name: 'Helper', params: { llm_id: 'echo', sys_prompt: 'Look it up', prompts: [{ role: 'user', content: '{sys.query}' }], tools: [{ component_name: 'Retrieval', name: 'Lookup', params: { kb_ids: toolIds } }] } }],
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Answer@content}'] }],
  });

  it('name the knowledge bases a Retrieval or a Retrieval tool names that the tenant lacks, and store the workflow all the same', async () => {
    const known = await create({ name: 'Known manuals', aliases: ['0a5aaec4a819b11f095f1047c16ec874'] });
    expect(known.status).toBe(201);
    const kb = known.json;
    const missing = '65cb5150819b11f08347047c16ec874f';
    const made = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'rag', dsl: ragDsl([kb.id, 'Known manuals', '0a5aaec4a819b11f095f1047c16ec874', missing, 'begin@kb'], ['Unknown handbook']) } });
    expect(made.status).toBe(201);
    expect(made.json.warnings).toEqual([
      { code: 'unknown_knowledge_base', component_id: 'Retrieval:Docs', ids: [missing], message: `Retrieval:Docs names a knowledge base this tenant does not have: ${missing}. The workflow is stored; a run fails there until it is the id, name or alias of one of the tenant's knowledge bases.` },
      { code: 'unknown_knowledge_base', component_id: 'Agent:Answer', ids: ['Unknown handbook'], message: expect.stringContaining('Agent:Answer names a knowledge base this tenant does not have: Unknown handbook.') },
    ]);
    expect((await api.call('GET', `/workflows/v1/workflows/${made.json.id}`)).status).toBe(200);
    const clean = await api.call('POST', `/workflows/v1/workflows/${made.json.id}/versions`, { body: { dsl: ragDsl([kb.id]) } });
    expect(clean.json).toEqual({ version: 2, active_version: 2, warnings: [] });
    const again = await api.call('POST', `/workflows/v1/workflows/${made.json.id}/versions`, { body: { dsl: ragDsl([missing, 'other']) } });
    expect(again.json.warnings).toMatchObject([{ component_id: 'Retrieval:Docs', ids: [missing, 'other'], message: expect.stringContaining('names knowledge bases this tenant does not have') }]);

    // RAGFlow's envelope stays as it is: the warning rides in `message`
    const agent = await api.call('POST', '/api/v1/agents', { body: { title: `RAG ${Date.now()}`, dsl: ragDsl([missing]) } });
    expect(agent.json).toMatchObject({ code: 0, data: { id: expect.any(String) } });
    expect(agent.json.message).toBe(`Warning: ${made.json.warnings[0].message}`);
    const updated = await api.call('PUT', `/api/v1/agents/${agent.json.data.id}`, { body: { dsl: ragDsl([kb.name]) } });
    expect(updated.json).toEqual({ code: 0, message: 'success', data: { update_time: expect.any(Number) } });
  });

  it('read the same for another tenant’s knowledge base as for a missing one, byte for byte', async () => {
    const otherTenant = await serveApp(api.engine);
    const theirs = (await otherTenant.call('POST', BASE, { body: { name: 'Their manuals' } })).json;
    await otherTenant.close();
    const missing = randomBytes(16).toString('hex');
    const withTheirs = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'theirs', dsl: ragDsl([theirs.id, 'Their manuals']) } });
    const withMissing = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'theirs', dsl: ragDsl([missing, 'Their manuals']) } });
    expect(withTheirs.json.warnings).toHaveLength(1);
    expect(JSON.stringify(withTheirs.json.warnings).replaceAll(theirs.id, '<id>')).toBe(JSON.stringify(withMissing.json.warnings).replaceAll(missing, '<id>'));
    const agentTheirs = await api.call('POST', '/api/v1/agents', { body: { title: `T ${theirs.id}`, dsl: ragDsl([theirs.id]) } });
    const agentMissing = await api.call('POST', '/api/v1/agents', { body: { title: `T ${missing}`, dsl: ragDsl([missing]) } });
    expect(agentTheirs.json.message.replaceAll(theirs.id, '<id>')).toBe(agentMissing.json.message.replaceAll(missing, '<id>'));

    // a run reaching that Retrieval fails there the same way for both
    const failure = async (workflowId: string, id: string) => {
      const ran = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'manuals?' } } });
      expect(ran.status).toBe(200);
      expect(ran.json).toMatchObject({ status: 'failed', error: { component_id: 'Retrieval:Docs' } });
      return JSON.stringify({ status: ran.json.status, error: ran.json.error }).replaceAll(id, '<id>');
    };
    const theirsFailed = await failure(withTheirs.json.id, theirs.id);
    expect(theirsFailed).toContain('does not exist');
    expect(theirsFailed).toBe(await failure(withMissing.json.id, missing));
  });
});
