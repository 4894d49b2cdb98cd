/**
 * RAGFlow's agent routes beyond create/read/converse, against RAGFlow's code (agent_api.py):
 * the agent list's filters and `{canvas, total}`, tags, template files, sessions with a name and
 * a user and their listing's `total`, deleting one session, versions, reset, templates, input
 * forms, logs, and the envelope answer for every route Easel does not have.
 */
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES } from '../../lib/http/ragflow/templates';
import { EXAMPLES_DIR, readExamples } from '../../lib/local/bootstrap';
import { fixture } from '../helpers/canvas';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

let api: Served;
beforeAll(async () => {
  api = await serveApp(testEngine());
});
afterAll(async () => {
  await api.close();
});

const rf = (method: string, path: string, body?: unknown, key?: string | null) =>
  api.call(method, `/api/v1${path}`, { ...(body !== undefined ? { body } : {}), ...(key !== undefined ? { key } : {}) });

async function newAgent(body: Record<string, unknown>): Promise<string> {
  const created = await rf('POST', '/agents', { dsl: fixture('form-intake'), ...body });
  expect(created.json, JSON.stringify(created.json)).toMatchObject({ code: 0 });
  return created.json.data.id as string;
}

const ids = (res: { json: any }) => (res.json.data.canvas as { id: string }[]).map((a) => a.id);

describe('GET /api/v1/agents', () => {
  it('filters by keywords, canvas type, category, tags and owner, orders, pages and counts', async () => {
    const tag = `t${Date.now()}`;
    const a = await newAgent({ title: `Alpha ${tag}`, canvas_type: 'Marketing' });
    const b = await newAgent({ title: `Beta ${tag}`, canvas_type: 'Other' });
    const c = await newAgent({ title: `Gamma ${tag}`, canvas_type: 'Marketing', canvas_category: 'dataflow_canvas' });
    expect((await rf('PUT', `/agents/${b}/tags`, { tags: [tag, 'sales'] })).json).toEqual({ code: 0, message: 'success', data: true });
    expect((await rf('PUT', `/agents/${c}/tags`, { tags: `${tag}, ops` })).json.code).toBe(0);

    const byKeyword = await rf('GET', `/agents?keywords=${tag.toUpperCase()}&orderby=create_time&desc=false`);
    expect(byKeyword.json).toMatchObject({ code: 0, message: 'success', data: { total: 3 } });
    expect(ids(byKeyword)).toEqual([a, b, c]);
    expect(ids(await rf('GET', `/agents?keywords=${tag}&desc=true&orderby=create_time`))).toEqual([c, b, a]);
    expect(ids(await rf('GET', `/agents?keywords=gamma ${tag}`))).toEqual([c]);
    // a keyword is looked for in the tags too
    expect(ids(await rf('GET', '/agents?keywords=sales')).includes(b)).toBe(true);
    expect(ids(await rf('GET', `/agents?keywords=${tag}&canvas_type=Marketing&orderby=create_time&desc=false`))).toEqual([a, c]);
    expect(ids(await rf('GET', `/agents?keywords=${tag}&canvas_category=dataflow_canvas`))).toEqual([c]);
    expect(ids(await rf('GET', `/agents?keywords=${tag}&canvas_category=agent_canvas,dataflow_canvas`)).length).toBe(3);
    expect(ids(await rf('GET', '/agents?tags=sales,ops&orderby=create_time&desc=false'))).toEqual([b, c]);
    expect((await rf('GET', '/agents?canvas_category=compilation_template_group')).json.data).toEqual({ canvas: [], total: 0 });
    const paged = await rf('GET', `/agents?keywords=${tag}&orderby=create_time&desc=false&page=2&page_size=2`);
    expect([ids(paged), paged.json.data.total]).toEqual([[c], 3]);
    expect((await rf('GET', `/agents?owner_ids=${api.tenant}&keywords=${tag}`)).json.data.total).toBe(3);
    expect((await rf('GET', '/agents?owner_ids=someone-else')).json).toEqual({ code: 103, message: 'Only authorized owner_ids can be queried.', data: false });

    const filters = (await rf('GET', '/agents?type=filter')).json.data;
    expect(filters.filter.owner).toEqual([{ id: api.tenant, label: api.tenant, count: filters.total }]);
    expect(filters.filter.canvas_category).toContainEqual({ id: 'dataflow_canvas', count: 1 });
    const tags = (await rf('GET', '/agents/tags')).json.data as { tag: string; count: number }[];
    expect(tags[0]).toEqual({ tag, count: 2 });
    expect(tags).toContainEqual({ tag: 'ops', count: 1 });
    expect((await rf('GET', '/agents/tags?canvas_category=dataflow_canvas')).json.data).toEqual([{ tag: 'ops', count: 1 }, { tag, count: 1 }]);
  });

  it('takes a RAGFlow template file as it ships: its English title and description, its canvas type', async () => {
    const title = `Feedback dispatcher ${Date.now()}`;
    const template = { id: 11, title: { en: title, zh: '客户反馈' }, description: { en: 'Routes feedback.', de: 'Leitet weiter.' }, canvas_type: 'Customer Support', avatar: 'data:image/png;base64,AA==', dsl: fixture('form-intake') };
    const created = await rf('POST', '/agents', template);
    expect(created.json).toMatchObject({ code: 0, data: { title, description: 'Routes feedback.', canvas_type: 'Customer Support', canvas_category: 'agent_canvas' } });
    // the same template again: its title is taken
    expect((await rf('POST', '/agents', template)).json).toEqual({ code: 102, message: `${title} already exists.` });
    // and natively
    const native = await api.call('POST', '/workflows/v1/workflows', { body: { ...template, title: { en: `${title} native` } } });
    expect(native.status).toBe(201);
    expect(native.json).toMatchObject({ name: `${title} native`, description: 'Routes feedback.', canvas_type: 'Customer Support', canvas_category: 'agent_canvas' });
    expect((await api.call('POST', '/workflows/v1/workflows', { body: { dsl: fixture('form-intake') } })).json).toMatchObject({ code: 'invalid_request', field: 'name' });
  });
});

describe('sessions', () => {
  it('keep their name and user, list with a total, filter, and are deleted one by one', async () => {
    const agent = await newAgent({ title: `Sessions ${Date.now()}` });
    const made = await rf('POST', `/agents/${agent}/sessions`, { name: 'Support chat', user_id: 'u-1' });
    expect(made.json).toMatchObject({ code: 0, data: { name: 'Support chat', user_id: 'u-1', agent_id: agent } });
    const byQuery = (await api.call('POST', `/api/v1/agents/${agent}/sessions?user_id=u-2`, { body: {} })).json.data;
    expect(byQuery).toMatchObject({ name: '', user_id: 'u-2' });
    const third = (await rf('POST', `/agents/${agent}/sessions`, { name: 'Other' })).json.data.id;
    expect((await rf('POST', `/agents/${agent}/sessions`, { name: 'x'.repeat(256) })).json.code).toBe(101);

    const all = (await rf('GET', `/agents/${agent}/sessions?orderby=create_time&desc=false&dsl=false`)).json;
    expect(all).toMatchObject({ code: 0, message: 'success', total: 3 });
    expect(all.data.map((s: { id: string }) => s.id)).toEqual([made.json.data.id, byQuery.id, third]);
    expect(all.data[0]).toMatchObject({ name: 'Support chat', user_id: 'u-1' });
    const page = (await rf('GET', `/agents/${agent}/sessions?orderby=create_time&desc=false&page=2&page_size=2`)).json;
    expect([page.data.map((s: { id: string }) => s.id), page.total]).toEqual([[third], 3]);
    expect((await rf('GET', `/agents/${agent}/sessions?user_id=u-1`)).json).toMatchObject({ total: 1, data: [{ id: made.json.data.id }] });
    expect((await rf('GET', `/agents/${agent}/sessions?keywords=support`)).json).toMatchObject({ total: 1, data: [{ id: made.json.data.id }] });
    expect((await rf('GET', `/agents/${agent}/sessions?exp_user_id=u-2`)).json).toEqual({ code: 0, message: 'success', data: [{ id: byQuery.id, name: '' }], total: 1 });
    expect((await rf('GET', `/agents/${agent}/sessions?from_date=2999-01-01`)).json).toMatchObject({ total: 0, data: [] });
    expect((await rf('GET', `/agents/${agent}/sessions?to_date=2999-01-01`)).json.total).toBe(3);
    expect((await rf('GET', `/agents/${agent}/sessions?from_date=yesterday`)).json.code).toBe(101);

    expect((await rf('DELETE', `/agents/${agent}/sessions/${third}`)).json).toEqual({ code: 0, message: 'success', data: 1 });
    expect((await rf('DELETE', `/agents/${agent}/sessions/${third}`)).json).toEqual({ code: 102, message: 'Session not found!' });
    expect((await rf('GET', `/agents/${agent}/sessions/${third}`)).json).toEqual({ code: 102, message: 'Session not found!' });
    // another agent's session is not this agent's
    const elsewhere = await newAgent({ title: `Elsewhere ${Date.now()}` });
    expect((await rf('DELETE', `/agents/${elsewhere}/sessions/${byQuery.id}`)).json).toEqual({ code: 102, message: 'Session not found!' });
    expect((await rf('GET', `/agents/${agent}/sessions`)).json.total).toBe(2);
    // duplicates are reported once the rest went through
    expect((await rf('DELETE', `/agents/${agent}/sessions`, { ids: [byQuery.id, byQuery.id] })).json).toEqual({ code: 0, data: { success_count: 1, errors: [`Duplicate session ids: ${byQuery.id}`] } });
  });
});

describe('versions, reset, templates, input forms and logs', () => {
  it('lists an agent’s versions newest first, the active one released, and reads one with its DSL', async () => {
    const agent = await newAgent({ title: `Versions ${Date.now()}` });
    const changed = { ...(fixture('form-intake') as Record<string, unknown>), variables: { note: { type: 'string', value: 'v2' } } };
    await rf('PUT', `/agents/${agent}`, { dsl: changed });
    const list = (await rf('GET', `/agents/${agent}/versions`)).json;
    expect(list).toMatchObject({ code: 0, message: 'success', data: [{ id: '2', user_canvas_id: agent, release: true }, { id: '1', release: false }] });
    expect(list.data[0].title).toMatch(new RegExp(`^${api.tenant}_Versions \\d+_\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$`));
    expect(list.data[0].dsl).toBeUndefined();
    const one = (await rf('GET', `/agents/${agent}/versions/2`)).json;
    expect(one).toMatchObject({ code: 0, data: { id: '2', release: true, dsl: { variables: { note: { value: 'v2' } } } } });
    for (const vid of ['3', '0', 'abc', '1'.repeat(40)]) expect((await rf('GET', `/agents/${agent}/versions/${vid}`)).json).toEqual({ code: 102, message: 'Version not found.' });
    expect((await rf('GET', `/agents/${'0'.repeat(32)}/versions`)).json).toEqual({ code: 103, message: 'Make sure you have permission to access the agent.', data: false });
  });

  it('resets an agent: a DSL with run state in it becomes a new active version without it', async () => {
    const clean = await newAgent({ title: `Clean ${Date.now()}` });
    const reset = (await rf('POST', `/agents/${clean}/reset`)).json;
    expect(reset).toMatchObject({ code: 0, message: 'success', data: { path: [], history: [], retrieval: [], memory: [] } });
    expect((await rf('GET', `/agents/${clean}`)).json.data.version).toBe(1);

    const stateful = { ...(fixture('form-intake') as Record<string, unknown>), path: ['begin'], history: [['user', 'hi']], globals: { 'sys.query': 'hi', 'sys.conversation_turns': 3, 'sys.files': ['f'], 'env.tone': 'loud' }, variables: { tone: { type: 'string', value: 'calm' } } };
    const agent = await newAgent({ title: `Stateful ${Date.now()}`, dsl: stateful });
    const answered = (await rf('POST', `/agents/${agent}/reset`)).json.data;
    expect(answered).toMatchObject({ path: [], history: [], globals: { 'sys.query': '', 'sys.conversation_turns': 0, 'sys.files': [], 'env.tone': 'calm' } });
    const after = (await rf('GET', `/agents/${agent}`)).json.data;
    expect(after.version).toBe(2);
    expect(after.dsl).toEqual(answered);
    expect((await rf('POST', `/agents/${agent}/reset`)).json.data).toEqual(answered);
    expect((await rf('GET', `/agents/${agent}`)).json.data.version).toBe(2);
  });

  it('answers the examples Easel ships as RAGFlow templates', async () => {
    expect(EXAMPLES.map((e) => e.id)).toEqual((await readExamples()).map((e) => e.id));
    expect(readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.json')).length).toBe(EXAMPLES.length);
    const res = (await rf('GET', '/agents/templates')).json;
    expect(res).toMatchObject({ code: 0, message: 'success' });
    const intake = res.data.find((t: { id: string }) => t.id === 'ex-form-intake');
    expect(intake).toMatchObject({ title: { en: 'Form intake' }, canvas_category: 'agent_canvas', dsl: { components: { begin: {} } } });
    expect(typeof intake.description.en).toBe('string');
  });

  it('answers a component’s input form as RAGFlow does', async () => {
    const agent = await newAgent({ title: `Forms ${Date.now()}`, dsl: fixture('form-then-llm') });
    const form = (cid: string) => rf('GET', `/agents/${agent}/components/${encodeURIComponent(cid)}/input-form`);
    expect((await form('UserFillUp:Topic')).json).toEqual({ code: 0, message: 'success', data: { topic: { name: 'Topic', type: 'line', optional: false, value: null } } });
    expect((await form('LLM:Writer')).json.data).toEqual({ 'UserFillUp:Topic@topic': { type: 'line', name: 'UserFillUp:Topic@topic' } });
    expect((await form('Message:Out')).json.data).toEqual({});
    expect((await form('Nope:Missing')).json).toEqual({ code: 102, message: 'Component not found.' });
    const routed = await newAgent({ title: `Routed ${Date.now()}`, dsl: fixture('ragflow-begin-categorize') });
    expect((await rf('GET', `/agents/${routed}/components/${encodeURIComponent('Categorize:RouteIt')}/input-form`)).json.data).toEqual({ query: { type: 'line', name: 'Query' } });
    const begin = (await rf('GET', `/agents/${routed}/components/begin/input-form`)).json.data;
    expect(Object.keys(begin)).toEqual(['customer', 'tier']);
  });

  it('answers logs as RAGFlow does for a message it keeps no log of', async () => {
    const agent = await newAgent({ title: `Logs ${Date.now()}` });
    expect((await rf('GET', `/agents/${agent}/logs/${'a'.repeat(32)}`)).json).toEqual({ code: 0, message: 'success', data: {} });
    expect((await rf('GET', `/agents/${'0'.repeat(32)}/logs/x`)).json).toEqual({ code: 103, message: 'Make sure you have permission to access the agent.', data: false });
  });
});

describe('routes Easel does not have', () => {
  it('are answered inside the envelope with code 103 naming the operation, never a bare 404', async () => {
    const cases: [string, string, string][] = [
      ['GET', '/datasets/0123abcd/documents/4567cdef', 'GET /api/v1/datasets/{id}/documents/{id}'],
      ['POST', '/datasets/0123abcd/documents/4567cdef/chunks', 'POST /api/v1/datasets/{id}/documents/{id}/chunks'],
      ['GET', '/datasets/0123abcd/knowledge_graph', 'GET /api/v1/datasets/{id}/knowledge_graph'],
      ['POST', '/chats/0123abcd/completions', 'POST /api/v1/chats/{id}/completions'],
      ['GET', '/agents/prompts', 'GET /api/v1/agents/prompts'],
      ['POST', '/agents/rerun', 'POST /api/v1/agents/rerun'],
      ['POST', '/agents/0123abcd/components/begin/debug', 'POST /api/v1/agents/{id}/components/begin/debug'],
      ['DELETE', '/no/such/Thing', 'DELETE /api/v1/no/such/{id}'],
    ];
    for (const [method, path, named] of cases) {
      const res = await rf(method, path, method === 'GET' ? undefined : {});
      expect(res.status).toBe(200);
      expect(res.json.code, path).toBe(103);
      expect(res.json.message).toBe(`${named} is not supported by Easel (it serves RAGFlow's agent API: agents, sessions, completions and uploads; of its dataset API: datasets, their documents, parsing, chunk listing and retrieval; and its MCP servers).`);
    }
    // still behind the key
    expect((await rf('GET', '/datasets', undefined, null)).json).toEqual({ code: 0, message: '`Authorization` can\'t be empty', data: false });
  });
});

describe('an execute key with an end-user token', () => {
  it('reads what it may use and manages nothing', async () => {
    const agent = await newAgent({ title: `Public ${Date.now()}` });
    const key = await api.addKey(api.tenant, 'execute', [agent]);
    const { makeEmbedSecret, endUserToken } = await import('../helpers/end-users');
    const embed = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);
    const visitor = `${key}.${endUserToken(embed, { sub: 'visitor', workflows: [agent] })}`;
    const session = (await rf('POST', `/agents/${agent}/sessions`, { name: 'mine', user_id: 'someone-else' }, visitor)).json.data;
    expect(session).toMatchObject({ name: 'mine', user_id: 'visitor' });
    expect((await rf('GET', `/agents/${agent}/versions`, undefined, visitor)).json.code).toBe(0);
    expect((await rf('GET', `/agents/${agent}/components/begin/input-form`, undefined, visitor)).json.code).toBe(0);
    expect((await rf('GET', '/agents/templates', undefined, visitor)).json.code).toBe(0);
    expect(ids(await rf('GET', '/agents', undefined, visitor))).toEqual([agent]);
    const admin = { code: 103, message: 'This operation needs an admin API key.' };
    expect((await rf('POST', `/agents/${agent}/reset`, undefined, visitor)).json).toEqual(admin);
    expect((await rf('PUT', `/agents/${agent}/tags`, { tags: ['x'] }, visitor)).json).toEqual(admin);
    expect((await rf('DELETE', `/agents/${agent}/sessions/${session.id}`, undefined, visitor)).json).toEqual(admin);
    expect((await rf('GET', `/agents/${agent}/sessions/${session.id}`, undefined, visitor)).json.code).toBe(0);
  });
});
