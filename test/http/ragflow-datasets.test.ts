/**
 * RAGFlow's dataset API subset (`/api/v1/datasets`, documents, parsing, chunks, `/retrieval`)
 * through the app on a real HTTP server, over the real knowledge service on DynamoDB Local:
 * RAGFlow's envelope, field names and messages; what Easel lacks refused by name; a document
 * that fails to parse shows FAIL with its reason and breaks nothing else; deletes leave the
 * search; admin keys only. RAGFlow's own SDK drives the same routes in test/conformance.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DOCUMENT_BYTES } from '../../lib/knowledge/limits';
import { fixture } from '../helpers/canvas';
import { endUserToken, makeEmbedSecret } from '../helpers/end-users';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { BROKEN_PDF, FAQ_TXT, GUIDE_MD, multipart } from '../helpers/knowledge-docs';

let api: Served;
let other = '';
let otherTenant = '';

const rf = (method: string, path: string, body?: unknown, key = api.adminKey) => api.call(method, `/api/v1${path}`, { key, ...(body !== undefined ? { body } : {}) });

async function upload(datasetId: string, parts: { name: string; content: string | Buffer; type?: string }[], key = api.adminKey) {
  const { body, type } = multipart(parts);
  const res = await fetch(`${api.url}/api/v1/datasets/${datasetId}/documents`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': type }, body });
  return JSON.parse(await res.text()) as any;
}

async function newDataset(body: Record<string, unknown>) {
  const res = await rf('POST', '/datasets', body);
  expect(res.json.code, JSON.stringify(res.json)).toBe(0);
  return res.json.data as { id: string; name: string };
}

beforeAll(async () => {
  api = await serveApp(testEngine());
  otherTenant = newTenant();
  other = await api.addKey(otherTenant, 'admin');
});
afterAll(async () => {
  await api?.close();
});

describe('datasets', () => {
  it('are created as RAGFlow answers them, with the naive chunker’s settings', async () => {
    const res = await rf('POST', '/datasets', { name: 'Manuals', description: 'Product manuals', chunk_method: 'naive', permission: 'me', parser_config: { chunk_token_num: 128, delimiter: '\n', layout_recognize: 'DeepDOC', raptor: { use_raptor: false } }, avatar: null, embedding_model: null });
    expect(res.json).toEqual({
      code: 0,
      data: expect.objectContaining({
        id: expect.stringMatching(/^[0-9a-f]{32}$/),
        name: 'Manuals',
        description: expect.stringContaining('Product manuals'),
        chunk_method: 'naive',
        parser_config: { chunk_token_num: 128, delimiter: '\n', overlapped_percent: 0 },
        permission: 'me',
        document_count: 0,
        chunk_count: 0,
        token_num: 0,
        embedding_model: '',
        tenant_id: api.tenant,
        create_time: expect.any(Number),
        create_date: expect.stringMatching(/GMT$/),
      }),
    });
    // a name taken already is made unique, as RAGFlow makes it
    expect((await newDataset({ name: 'manuals' })).name).toBe('manuals(1)');
    expect((await newDataset({ name: 'Manuals' })).name).toBe('Manuals(2)');
  });

  it('refuse what RAGFlow refuses in its words, and what Easel lacks by name', async () => {
    const refused = async (body: unknown) => {
      const res = await rf('POST', '/datasets', body);
      expect(res.json.code, JSON.stringify(body)).toBe(101);
      return res.json.message as string;
    };
    expect(await refused({ name: '' })).toBe('Field: <name> - Message: <String should have at least 1 character> - Value: <>');
    expect(await refused({ description: 'x' })).toBe("Field: <name> - Message: <Field required> - Value: <{'description': 'x'}>");
    expect(await refused({ name: 'x', colour: 'red' })).toBe('Field: <colour> - Message: <Extra inputs are not permitted> - Value: <red>');
    expect(await refused({ name: 'x', chunk_method: 'poetry' })).toBe("Field: <chunk_method> - Message: <Input should be 'naive', 'book', 'email', 'laws', 'manual', 'one', 'paper', 'picture', 'presentation', 'qa', 'table', 'tag' or 'resume'> - Value: <poetry>");
    expect(await refused({ name: 'x', chunk_method: 'book' })).toBe("Field: <chunk_method> - Message: <Easel chunks with 'naive' only: 'book' is not supported> - Value: <book>");
    expect(await refused({ name: 'x', parser_config: { chunk_token_num: 0 } })).toBe('Field: <parser_config.chunk_token_num> - Message: <Input should be greater than or equal to 1> - Value: <0>');
    expect(await refused({ name: 'x', parser_config: { raptor: { use_raptor: true } } })).toBe('Field: <parser_config.raptor.use_raptor> - Message: <RAPTOR is not supported by Easel> - Value: <True>');
    expect(await refused({ name: 'x', parser_config: { auto_keywords: 3 } })).toBe('Field: <parser_config.auto_keywords> - Message: <Keyword extraction by a model is not supported by Easel> - Value: <3>');
    expect(await refused({ name: 'x', permission: 'team' })).toMatch(/^Field: <permission> - Message: <Easel keeps datasets per tenant/);
    expect(await refused({ name: 'x', permission: 'all' })).toBe("Field: <permission> - Message: <Input should be 'me' or 'team'> - Value: <all>");
    expect(await refused({ name: 'x', parse_type: 1, pipeline_id: 'a'.repeat(32) })).toMatch(/^Ingestion pipelines/);
    expect(await refused({ name: 'x', embedding_model: 'nomodel' })).toMatch(/embedding_model/);
    const raw = await api.call('POST', '/api/v1/datasets', { raw: JSON.stringify({ name: 'x' }), headers: { 'content-type': 'text/plain' } });
    expect(raw.json).toEqual({ code: 101, message: 'Unsupported content type: Expected application/json, got text/plain' });
  });

  it('are listed, paged, ordered and filtered as RAGFlow lists them; one is read with its size', async () => {
    const tenantKey = await api.addKey(newTenant(), 'admin');
    const mine = (path: string) => rf('GET', path, undefined, tenantKey);
    for (const name of ['First', 'Second', 'Third']) expect((await rf('POST', '/datasets', { name }, tenantKey)).json.code).toBe(0);
    const all = await mine('/datasets');
    expect(all.json).toMatchObject({ code: 0, total_datasets: 3 });
    expect(all.json.data.map((d: { name: string }) => d.name)).toEqual(['Third', 'Second', 'First']);
    expect((await mine('/datasets?page=1&page_size=1&orderby=create_time&desc=False')).json.data.map((d: { name: string }) => d.name)).toEqual(['First']);
    expect((await mine('/datasets?page=2&page_size=2')).json).toMatchObject({ total_datasets: 3, data: [{ name: 'First' }] });
    const second = all.json.data[1];
    expect((await mine('/datasets?name=second')).json.data.map((d: { id: string }) => d.id)).toEqual([second.id]);
    expect((await mine(`/datasets?id=${second.id}`)).json.data.map((d: { name: string }) => d.name)).toEqual(['Second']);
    expect((await mine(`/datasets?ids=${all.json.data[0].id},${second.id}&page_size=1`)).json).toMatchObject({ total_datasets: 2, data: [{ name: 'Third' }] });
    expect((await mine('/datasets?include_parsing_status=true')).json.data[0]).toMatchObject({ unstart_count: 0, done_count: 0, fail_count: 0 });

    const missing = 'f'.repeat(32);
    expect((await rf('GET', `/datasets?id=${missing}`)).json).toEqual({ code: 102, message: `User '${api.tenant}' lacks permission for dataset '${missing}'` });
    expect((await rf('GET', '/datasets?name=Nobody')).json).toEqual({ code: 102, message: `User '${api.tenant}' lacks permission for dataset 'Nobody'` });
    expect((await rf('GET', '/datasets?id=nope')).json).toEqual({ code: 101, message: 'Field: <id> - Message: <Invalid UUID format> - Value: <nope>' });
    expect((await rf('GET', '/datasets?page_size=101')).json.message).toBe('Field: <page_size> - Message: <Value error, page_size must be less than or equal to 100> - Value: <101>');
    expect((await rf('GET', '/datasets?orderby=name')).json.message).toBe("Field: <orderby> - Message: <Input should be 'create_time' or 'update_time'> - Value: <name>");
    expect((await rf('GET', '/datasets?colour=red')).json.message).toBe('Field: <colour> - Message: <Extra inputs are not permitted> - Value: <red>');

    const one = await mine(`/datasets/${second.id}`);
    expect(one.json).toMatchObject({ code: 0, data: { id: second.id, name: 'Second', size: 0, connectors: [] } });
    expect((await rf('GET', `/datasets/${second.id}`)).json).toEqual({ code: 102, message: `User '${api.tenant}' lacks permission for dataset '${second.id}'` });
  });

  it('are updated as RAGFlow updates them', async () => {
    const ds = await newDataset({ name: 'To update' });
    await newDataset({ name: 'Taken' });
    const res = await rf('PUT', `/datasets/${ds.id}`, { name: 'Updated', parser_config: { chunk_token_num: 64 }, chunk_method: 'naive', pagerank: 0 });
    expect(res.json).toMatchObject({ code: 0, data: { id: ds.id, name: 'Updated', parser_config: { chunk_token_num: 64, delimiter: '\n' } } });
    expect((await rf('PUT', `/datasets/${ds.id}`, {})).json).toEqual({ code: 102, message: 'no properties were modified' });
    expect((await rf('PUT', `/datasets/${ds.id}`, { name: 'taken' })).json).toEqual({ code: 102, message: "Dataset name 'taken' already exists" });
    expect((await rf('PUT', `/datasets/${ds.id}`, { chunk_method: 'qa' })).json.message).toBe("Field: <chunk_method> - Message: <Easel chunks with 'naive' only: 'qa' is not supported> - Value: <qa>");
    expect((await rf('PUT', `/datasets/${ds.id}`, { pagerank: 10 })).json).toEqual({ code: 102, message: "'pagerank' can only be set when doc_engine is elasticsearch" });
    expect((await rf('PUT', '/datasets/not-a-uuid', { name: 'x' })).json).toEqual({ code: 101, message: 'Field: <dataset_id> - Message: <Invalid UUID format> - Value: <not-a-uuid>' });
    expect((await rf('PUT', `/datasets/${ds.id}`, { name: 'Mine now' }, other)).json).toEqual({ code: 102, message: `User '${otherTenant}' lacks permission for dataset '${ds.id}'` });
  });
});

describe('documents, parsing, chunks and retrieval', () => {
  it('upload UNSTART, parse to DONE or FAIL with the reason, list chunks and retrieve; a failed document breaks nothing else', async () => {
    const ds = await newDataset({ name: 'Espresso', parser_config: { chunk_token_num: 32 } });
    const uploaded = await upload(ds.id, [
      { name: 'guide.md', content: GUIDE_MD },
      { name: 'broken.pdf', content: BROKEN_PDF, type: 'application/pdf' },
      { name: 'faq.txt', content: FAQ_TXT, type: 'text/plain' },
    ]);
    expect(uploaded.code).toBe(0);
    expect(uploaded.data.map((d: { name: string; run: string; type: string; dataset_id: string }) => [d.name, d.run, d.type, d.dataset_id])).toEqual([
      ['guide.md', 'UNSTART', 'doc', ds.id],
      ['broken.pdf', 'UNSTART', 'pdf', ds.id],
      ['faq.txt', 'UNSTART', 'doc', ds.id],
    ]);
    const [guide, broken, faq] = uploaded.data.map((d: { id: string }) => d.id) as [string, string, string];

    expect((await rf('POST', `/datasets/${ds.id}/chunks`, {})).json).toEqual({ code: 102, message: '`document_ids` is required' });
    expect((await rf('POST', `/datasets/${ds.id}/chunks`, { document_ids: [guide, broken, faq] })).json).toEqual({ code: 0 });
    const listed = await rf('GET', `/datasets/${ds.id}/documents?page=1&page_size=30&orderby=create_time&desc=True&create_time_from=0&create_time_to=0`);
    expect(listed.json).toMatchObject({ code: 0, message: 'success', data: { total: 3 } });
    const byName = Object.fromEntries(listed.json.data.docs.map((d: { name: string }) => [d.name, d]));
    expect(byName['guide.md']).toMatchObject({ run: 'DONE', progress: 1, chunk_count: expect.any(Number), token_count: expect.any(Number), chunk_method: 'naive' });
    expect(byName['faq.txt']).toMatchObject({ run: 'DONE', progress: 1 });
    expect(byName['broken.pdf']).toMatchObject({ run: 'FAIL', chunk_count: 0 });
    expect(byName['broken.pdf'].progress_msg).not.toBe('');
    expect((await rf('GET', `/datasets/${ds.id}/documents?run=FAIL`)).json.data.docs.map((d: { id: string }) => d.id)).toEqual([broken]);
    expect((await rf('GET', `/datasets/${ds.id}/documents?run=3&suffix=md`)).json.data.docs.map((d: { id: string }) => d.id)).toEqual([guide]);
    expect((await rf('GET', `/datasets/${ds.id}/documents?id=${faq}`)).json.data).toMatchObject({ total: 1, docs: [{ id: faq, run: 'DONE' }] });
    expect((await rf('GET', `/datasets/${ds.id}/documents?id=${'e'.repeat(32)}`)).json).toEqual({ code: 102, message: `you don't own the document ${'e'.repeat(32)}` });
    expect((await rf('GET', `/datasets/${ds.id}/documents?run=DONEISH`)).json).toEqual({ code: 102, message: 'Invalid filter run status conditions: DONEISH' });
    expect((await rf('GET', `/datasets/${ds.id}`)).json.data).toMatchObject({ document_count: 3, chunk_count: byName['guide.md'].chunk_count + byName['faq.txt'].chunk_count });

    const chunks = await rf('GET', `/datasets/${ds.id}/documents/${guide}/chunks?page=1&page_size=2`);
    expect(chunks.json).toMatchObject({ code: 0, data: { total: byName['guide.md'].chunk_count, doc: { id: guide, run: 'DONE' } } });
    expect(chunks.json.data.chunks[0]).toEqual({ id: expect.any(String), content: expect.stringContaining('Espresso machine guide'), document_id: guide, docnm_kwd: 'guide.md', important_keywords: [], tag_kwd: [], questions: [], dataset_id: ds.id, image_id: '', doc_type_kwd: 'text', available: true, positions: [] });
    const chunkId = chunks.json.data.chunks[0].id;
    expect((await rf('GET', `/datasets/${ds.id}/documents/${guide}/chunks?id=${chunkId}`)).json.data).toMatchObject({ total: 1, chunks: [{ id: chunkId }] });
    expect((await rf('GET', `/datasets/${ds.id}/documents/${guide}/chunks?id=nochunk`)).json).toEqual({ code: 102, message: `Chunk not found: ${ds.id}/nochunk` });
    expect((await rf('GET', `/datasets/${ds.id}/documents/${guide}/chunks?keywords=citric`)).json.data.chunks.map((c: { content: string }) => c.content)).toEqual([expect.stringContaining('citric acid')]);

    const retrieved = await rf('POST', '/retrieval', { dataset_ids: [ds.id], question: 'How long is the warranty of the espresso machine?', similarity_threshold: 0, vector_similarity_weight: 0.3, page: 1, page_size: 5, highlight: true });
    expect(retrieved.json.code).toBe(0);
    expect(retrieved.json.data.chunks[0]).toMatchObject({ id: expect.any(String), content: expect.stringContaining('two years'), document_id: guide, document_keyword: 'guide.md', dataset_id: ds.id, similarity: expect.any(Number), highlight: expect.stringContaining('<em>') });
    expect(retrieved.json.data.doc_aggs).toContainEqual({ doc_id: guide, doc_name: 'guide.md', count: expect.any(Number) });
    const onlyFaq = await rf('POST', '/retrieval', { dataset_ids: [ds.id], document_ids: [faq], question: 'warranty', similarity_threshold: 0 });
    expect(new Set(onlyFaq.json.data.chunks.map((c: { document_id: string }) => c.document_id))).toEqual(new Set([faq]));

    // stopping finds nothing to stop: the parse ended within its request
    expect((await rf('DELETE', `/datasets/${ds.id}/chunks`, { document_ids: [guide] })).json).toEqual({ code: 102, message: "Can't stop parsing document that has not started or already completed", data: { error_code: 'DOC_STOP_PARSING_INVALID_STATE' } });
    expect((await rf('POST', `/datasets/${ds.id}/chunks`, { document_ids: [faq, 'e'.repeat(32)] })).json).toEqual({ code: 102, message: `Documents not found: ['${'e'.repeat(32)}']` });

    // a deleted document's chunks leave the search; the others stay
    expect((await rf('DELETE', `/datasets/${ds.id}/documents`, { ids: [faq] })).json).toEqual({ code: 0, data: { deleted: 1 } });
    const after = await rf('POST', '/retrieval', { dataset_ids: [ds.id], question: 'refunds returns warranty', similarity_threshold: 0 });
    expect(after.json.data.chunks.length).toBeGreaterThan(0);
    expect(after.json.data.chunks.every((c: { document_id: string }) => c.document_id === guide)).toBe(true);
    expect((await rf('GET', `/datasets/${ds.id}/documents/${faq}/chunks`)).json).toEqual({ code: 102, message: `you don't own the document ${faq}` });
  });

  it('refuse uploads as RAGFlow does, and an unsupported type or a document past the cap with the limit named', async () => {
    const ds = await newDataset({ name: 'Uploads' });
    const empty = await fetch(`${api.url}/api/v1/datasets/${ds.id}/documents`, { method: 'POST', headers: { authorization: `Bearer ${api.adminKey}`, 'content-type': 'multipart/form-data; boundary=zz' }, body: '--zz--\r\n' });
    expect(await empty.json()).toEqual({ code: 101, message: 'No file part!' });
    const unsupported = await upload(ds.id, [{ name: 'clip.mp4', content: '\u0000\u0000\u0000 ftypisom', type: 'video/mp4' }]);
    expect(unsupported.code).toBe(101);
    expect(unsupported.message).toMatch(/unsupported document type "\.mp4"; supported: /);
    const over = await upload(ds.id, [{ name: 'big.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES + 1, 'a') }]);
    expect(over).toEqual({ code: 101, message: `big.txt is ${MAX_DOCUMENT_BYTES + 1} bytes; a document is at most ${MAX_DOCUMENT_BYTES} bytes.` });
    const tooMuch = await upload(ds.id, [{ name: 'a.txt', content: Buffer.alloc(MAX_DOCUMENT_BYTES, 'a') }, { name: 'b.txt', content: Buffer.alloc(100_000, 'b') }]);
    expect(tooMuch).toEqual({ code: 101, message: `The documents are over ${MAX_DOCUMENT_BYTES} bytes (one request carries at most ${MAX_DOCUMENT_BYTES} bytes).` });
    expect((await rf('GET', `/datasets/${ds.id}/documents`)).json.data).toEqual({ total: 0, docs: [] });
    const missing = 'f'.repeat(32);
    expect(await upload(missing, [{ name: 'faq.txt', content: FAQ_TXT }])).toEqual({ code: 102, message: `Can't find the dataset with ID ${missing}!` });
    expect((await api.call('POST', `/api/v1/datasets/${ds.id}/documents?type=web`, { raw: '' })).json).toEqual({ code: 101, message: '`type=web` is not supported by Easel: upload files (`type=local`).' });
  });

  it('refuse deletes and retrievals as RAGFlow does, and what needs a model Easel lacks by name', async () => {
    const ds = await newDataset({ name: 'Refusals' });
    const [doc] = (await upload(ds.id, [{ name: 'faq.txt', content: FAQ_TXT }])).data;
    const del = (body: unknown) => rf('DELETE', `/datasets/${ds.id}/documents`, body).then((r) => r.json);
    expect(await del({})).toEqual({ code: 102, message: `should either provide doc ids or set delete_all(true), dataset: ${ds.id}. ` });
    expect(await del({ ids: [doc.id], delete_all: true })).toEqual({ code: 102, message: `should not provide both doc ids and delete_all(true), dataset: ${ds.id}. ` });
    expect(await del({ ids: [doc.id, doc.id] })).toEqual({ code: 101, message: `Field: <ids> - Message: <Duplicate ids: '${doc.id}'> - Value: <['${doc.id}', '${doc.id}']>` });
    expect(await del({ ids: ['x1', 'x2'] })).toEqual({ code: 102, message: `These documents do not belong to dataset ${ds.id} or Document not found: x1, x2` });

    const retrieve = (body: Record<string, unknown>) => rf('POST', '/retrieval', { dataset_ids: [ds.id], question: 'refunds', ...body }).then((r) => r.json);
    expect(await rf('POST', '/retrieval', { question: 'x' }).then((r) => r.json)).toEqual({ code: 102, message: '`dataset_ids` is required.' });
    expect(await rf('POST', '/retrieval', { dataset_ids: [ds.id] }).then((r) => r.json)).toEqual({ code: 102, message: '`question` is required.' });
    expect(await retrieve({ question: '  ' })).toEqual({ code: 0, data: { total: 0, chunks: [], doc_aggs: {} } });
    expect(await retrieve({ document_ids: ['nodoc'] })).toEqual({ code: 102, message: "The datasets don't own the document nodoc" });
    expect(await retrieve({ top_k: 0 })).toEqual({ code: 102, message: '`top_k` must be greater than 0' });
    expect(await retrieve({ highlight: 'maybe' })).toEqual({ code: 102, message: '`highlight` should be a boolean' });
    expect((await retrieve({ rerank_id: 'bge-reranker-v2-m3@BAAI' })).message).toMatch(/^Rerank models are not supported by Easel/);
    expect((await retrieve({ keyword: true })).message).toMatch(/^`keyword` \(keywords a chat model extracts/);
    expect((await retrieve({ cross_languages: ['French'] })).code).toBe(101);
    expect((await retrieve({ use_kg: true })).code).toBe(101);
    expect((await retrieve({ metadata_condition: { conditions: [{ name: 'a', comparison_operator: 'is', value: 'b' }] } })).code).toBe(101);
    // what the SDK sends when nothing is asked for is taken
    expect((await retrieve({ rerank_id: null, keyword: false, cross_languages: null, metadata_condition: null, use_kg: false, toc_enhance: false })).code).toBe(0);
  });
});

describe('deleting datasets', () => {
  it('deletes by id and all of them; a missing or another tenant’s id deletes nothing and says which', async () => {
    const key = await api.addKey(newTenant(), 'admin');
    const make = async (name: string) => (await rf('POST', '/datasets', { name }, key)).json.data.id as string;
    const [a, b, c] = [await make('A'), await make('B'), await make('C')];
    const theirs = (await newDataset({ name: 'Not yours' })).id;
    const del = (body: unknown) => rf('DELETE', '/datasets', body, key).then((r) => r.json);
    expect(await del({ ids: [] })).toEqual({ code: 0, data: { success_count: 0 } });
    expect(await del({ ids: [a, theirs] })).toMatchObject({ code: 102, message: expect.stringMatching(new RegExp(`lacks permission for datasets: '${theirs}'$`)) });
    expect(await del({ ids: ['nope'] })).toEqual({ code: 101, message: 'Field: <ids> - Message: <Invalid UUID format> - Value: <nope>' });
    expect(await del({ ids: [a] })).toEqual({ code: 0, data: { success_count: 1 } });
    expect((await rf('GET', '/datasets', undefined, key)).json.data.map((d: { id: string }) => d.id)).toEqual([c, b]);
    expect(await del({ delete_all: true })).toEqual({ code: 0, data: { success_count: 2 } });
    expect((await rf('GET', '/datasets', undefined, key)).json).toEqual({ code: 0, data: [], total_datasets: 0 });
    expect((await rf('GET', `/datasets/${theirs}`)).json.code).toBe(0);
  });
});

describe('who may', () => {
  it('admin keys only: an end user’s key is refused with code 103 before anything is read', async () => {
    const ds = await newDataset({ name: 'Admins only' });
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'w', dsl: fixture('form-intake') } })).json.id;
    const execute = await api.addKey(api.tenant, 'execute', [wf]);
    const embed = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);
    const endUser = `${execute}.${endUserToken(embed, { sub: 'visitor', workflows: [wf] })}`;
    const doc = '0'.repeat(32);
    const routes: [string, string, unknown?][] = [
      ['POST', '/datasets', { name: 'x' }],
      ['GET', '/datasets'],
      ['DELETE', '/datasets', { ids: [ds.id] }],
      ['GET', `/datasets/${ds.id}`],
      ['PUT', `/datasets/${ds.id}`, { name: 'y' }],
      ['POST', `/datasets/${ds.id}/documents`, {}],
      ['GET', `/datasets/${ds.id}/documents`],
      ['DELETE', `/datasets/${ds.id}/documents`, { ids: [doc] }],
      ['POST', `/datasets/${ds.id}/chunks`, { document_ids: [doc] }],
      ['DELETE', `/datasets/${ds.id}/chunks`, { document_ids: [doc] }],
      ['GET', `/datasets/${ds.id}/documents/${doc}/chunks`],
      ['POST', '/retrieval', { dataset_ids: [ds.id], question: 'x' }],
    ];
    for (const [method, path, body] of routes) {
      expect([method, path, (await rf(method, path, body, endUser)).json]).toEqual([method, path, { code: 103, message: 'This operation needs an admin API key.' }]);
      expect((await rf(method, path, body, execute)).json.code).toBe(109);
    }
    expect((await rf('GET', `/datasets/${ds.id}`)).json.data.name).toBe('Admins only');
  });
});
