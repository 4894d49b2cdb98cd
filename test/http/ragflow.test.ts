/**
 * RAGFlow's agent API, replayed against Easel: the documented requests, and the answers
 * RAGFlow's code (api/apps/restful_apis/agent_api.py) gives and its Python SDK reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { newTenant, testEngine } from '../helpers/engine';
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

/** RAGFlow SSE: `data:{json}` frames ending `data:[DONE]`. */
function dataFrames(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => {
      expect(f.startsWith('data:')).toBe(true);
      const payload = f.slice(5).trim();
      return payload === '[DONE]' ? '[DONE]' : JSON.parse(payload);
    });
}

async function newAgent(title: string, dsl: unknown = fixture('form-intake')): Promise<string> {
  const created = await rf('POST', '/agents', { title, description: 'A test agent', dsl });
  expect(created.json).toMatchObject({ code: 0, message: 'success', data: { title } });
  return created.json.data.id as string;
}

describe('RAGFlow agent management', () => {
  it('creates, lists, reads, updates and deletes agents in RAGFlow’s shapes', async () => {
    const created = await rf('POST', '/agents', { title: 'Test Agent', description: 'A test agent', dsl: fixture('form-intake') });
    expect(created.status).toBe(200);
    // RAGFlow answers the agent it made
    expect(created.json).toMatchObject({ code: 0, message: 'success', data: { title: 'Test Agent', canvas_category: 'agent_canvas', dsl: { components: { begin: {} } } } });
    const list = await rf('GET', '/agents?page=1&page_size=30&orderby=update_time&desc=True&title=Test%20Agent');
    expect(list.json).toMatchObject({ code: 0, message: 'success', data: { total: 1 } });
    const agent = list.json.data.canvas[0];
    expect(agent).toMatchObject({ id: created.json.data.id, title: 'Test Agent', description: 'A test agent', canvas_category: 'agent_canvas', avatar: null, canvas_type: null, tags: '', type: 'agent', tenant_id: api.tenant });
    expect(agent.id).toMatch(/^[0-9a-f]{32}$/);
    // a listing row carries no DSL, as RAGFlow's; the agent itself does
    expect(agent.dsl).toBeUndefined();
    const one = (await rf('GET', `/agents/${agent.id}`)).json;
    expect(one).toMatchObject({ code: 0, message: 'success', data: { id: agent.id, user_id: api.tenant } });
    expect(one.data.dsl.components.begin.obj.component_name).toBe('Begin');
    expect(typeof one.data.create_time).toBe('number');
    expect(one.data.create_date).toMatch(/GMT$/);

    const changed = fixture('form-intake') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    (changed.components['Message:BraveOwlsSing'] as { obj: { params: Record<string, unknown> } }).obj.params.content = ['v2'];
    const put = (await rf('PUT', `/agents/${agent.id}`, { title: 'Renamed', dsl: changed, canvas_type: 'Other' })).json;
    expect(put).toEqual({ code: 0, message: 'success', data: { update_time: expect.any(Number) } });
    expect(put.data.update_time).toBeGreaterThanOrEqual(agent.update_time);
    const updated = (await rf('GET', `/agents/${agent.id}`)).json.data;
    expect(updated).toMatchObject({ title: 'Renamed', version: 2, canvas_type: 'Other' });
    expect(updated.dsl.components['Message:BraveOwlsSing'].obj.params.content).toEqual(['v2']);

    expect((await rf('DELETE', `/agents/${agent.id}`, {})).json).toEqual({ code: 0, message: 'success', data: true });
    expect((await rf('GET', `/agents?id=${agent.id}`)).json).toEqual({ code: 0, message: 'success', data: { canvas: [], total: 0 } });
    expect((await rf('GET', `/agents/${agent.id}`)).json).toEqual({ code: 102, message: 'canvas not found.' });
  });

  it('answers RAGFlow’s errors', async () => {
    expect((await rf('POST', '/agents', { title: 'x' })).json).toEqual({ code: 101, message: 'No DSL data in request.', data: false });
    expect((await rf('POST', '/agents', { title: 'x', dsl: '{nope' })).json).toEqual({ code: 101, message: 'Invalid DSL JSON string.', data: false });
    expect((await rf('POST', '/agents', { title: 'x', dsl: [1] })).json).toEqual({ code: 101, message: 'DSL must be a JSON object.', data: false });
    expect((await rf('POST', '/agents', { dsl: fixture('form-intake') })).json).toEqual({ code: 101, message: 'No title in request.', data: false });
    const twice = await newAgent(`Twice ${Date.now()}`);
    const title = (await rf('GET', `/agents/${twice}`)).json.data.title as string;
    // titles are compared in any case, as RAGFlow compares them
    expect((await rf('POST', '/agents', { title: title.toUpperCase(), dsl: fixture('form-intake') })).json).toEqual({ code: 102, message: `${title.toUpperCase()} already exists.` });
    const other = await newAgent(`Other ${Date.now()}`);
    expect((await rf('PUT', `/agents/${other}`, { title: ` ${title.toLowerCase()} ` })).json).toEqual({ code: 102, message: `${title.toLowerCase()} already exists.` });
    // its own title, in another case, is no conflict
    expect((await rf('PUT', `/agents/${twice}`, { title: title.toLowerCase() })).json.code).toBe(0);
    const bad = await rf('POST', '/agents', { title: 'bad', dsl: { components: { 'Tokenizer:X': { obj: { component_name: 'Tokenizer', params: {} } } } } });
    expect(bad.json).toMatchObject({ code: 101, data: false });
    expect(bad.json.message).toMatch(/unsupported components: Tokenizer/);
    expect((await rf('PUT', `/agents/${'0'.repeat(32)}`, { title: 'x' })).json).toEqual({ code: 103, message: 'Make sure you have permission to access the agent.', data: false });
    expect((await rf('DELETE', `/agents/${'0'.repeat(32)}`, {})).json).toEqual({ code: 103, message: 'Only the owner of the agent is authorized for this operation.', data: false });
    expect((await rf('GET', '/agents?page_size=101')).json).toEqual({ code: 101, message: 'page_size must be less than or equal to 100' });
    expect((await rf('GET', '/agents', undefined, null)).json).toEqual({ code: 0, message: '`Authorization` can\'t be empty', data: false });
    expect((await rf('GET', '/agents', undefined, 'an-invalid-key-0000000')).json).toEqual({ code: 109, message: 'Authentication error: API key is invalid!', data: false });
  });
});

describe('RAGFlow sessions', () => {
  it('creates a session at turn 0 with the prologue, lists, reads with a dsl view, and deletes', async () => {
    const agentId = await newAgent(`Sessions ${Date.now()}`);
    const created = await rf('POST', `/agents/${agentId}/sessions`, {});
    expect(created.json.code).toBe(0);
    const session = created.json.data;
    expect(created.json.message).toBeUndefined();
    expect(session).toMatchObject({ agent_id: agentId, name: '', source: 'agent', message: [{ role: 'assistant', content: "Hello! Let's get you registered." }] });
    expect(session.id).toMatch(/^[0-9a-f]{32}$/);
    expect(session.dsl.components.begin).toBeDefined();
    expect(session.dsl.easel).toMatchObject({ status: 'not_started', turn_number: 0 });

    const asked = await rf('POST', `/agents/${agentId}/completions`, { question: 'Hello', stream: false, session_id: session.id });
    expect(asked.json.data.session_id).toBe(session.id);
    const one = await rf('GET', `/agents/${agentId}/sessions/${session.id}`);
    expect(one.json.data.messages).toEqual([{ role: 'assistant', content: "Hello! Let's get you registered." }, { role: 'user', content: 'Hello' }]);
    expect(one.json.data.dsl.easel.status).toBe('waiting_for_input');

    const other = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data.id;
    const list = await rf('GET', `/agents/${agentId}/sessions?page=1&page_size=30&orderby=create_time&desc=true&dsl=false`);
    expect(list.json).toMatchObject({ code: 0, message: 'success', total: 2 });
    expect(list.json.data.map((s: { id: string }) => s.id).sort()).toEqual([session.id, other].sort());
    expect(list.json.data[0].dsl).toBeUndefined();
    expect((await rf('GET', `/agents/${agentId}/sessions/${'e'.repeat(32)}`)).json).toEqual({ code: 102, message: 'Session not found!' });

    const foreign = 'f'.repeat(32);
    expect((await rf('DELETE', `/agents/${agentId}/sessions`, { ids: [foreign] })).json).toEqual({ code: 102, message: `The agent doesn't own the session ${foreign}` });
    expect((await rf('DELETE', `/agents/${agentId}/sessions`, { ids: [session.id, foreign] })).json).toEqual({ code: 0, data: { success_count: 1, errors: [`The agent doesn't own the session ${foreign}`] } });
    expect((await rf('DELETE', `/agents/${agentId}/sessions`, {})).json).toEqual({ code: 0 });
    expect((await rf('DELETE', `/agents/${agentId}/sessions`, { delete_all: true })).json).toEqual({ code: 0 });
    expect((await rf('GET', `/agents/${agentId}/sessions`)).json).toEqual({ code: 0, message: 'success', data: [], total: 0 });
  });
});

describe('RAGFlow completions', () => {
  it('streams a run that pauses at a form, then continues it to the end, in RAGFlow’s SSE frames', async () => {
    const agentId = await newAgent(`Stream ${Date.now()}`);
    const first = await rf('POST', `/agents/${agentId}/completions`, { question: 'Hello', stream: true });
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    const frames = dataFrames(first.text) as { event: string; session_id: string; message_id: string; created_at: number; task_id: string; data: Record<string, unknown> }[];
    expect(frames.at(-1)).toBe('[DONE]');
    const pause = frames.at(-2) as (typeof frames)[number];
    // task_id is the session, as RAGFlow's canvas is created with task_id=session_id
    expect(pause).toMatchObject({ event: 'user_inputs', task_id: pause.session_id, data: { tips: 'Tell us about yourself (you said: Hello)' } });
    expect(pause.data.content).toBeUndefined();
    expect(Object.keys(pause.data.inputs as object)).toContain('name');
    expect(pause.session_id).toMatch(/^[0-9a-f]{32}$/);
    expect(typeof pause.created_at).toBe('number');
    expect(frames[0]).toMatchObject({ event: 'workflow_started' });

    const second = await rf('POST', `/agents/${agentId}/completions`, {
      question: '',
      stream: true,
      session_id: pause.session_id,
      inputs: { name: { type: 'line', value: 'Ada' }, age: { type: 'integer', value: 36 }, plan: { type: 'options', value: 'pro' } },
    });
    const events = (dataFrames(second.text).slice(0, -1) as { event: string; session_id: string; data: { content?: string } }[]);
    // a session a completion started is on RAGFlow's workflow path: every canvas event, no workflow_started on a resume
    const names = events.map((e) => e.event);
    expect(names.at(-1)).toBe('workflow_finished');
    expect(names).toContain('message_end');
    expect(names).toContain('node_started');
    expect(names).toContain('node_finished');
    expect(names).not.toContain('workflow_started');
    expect(events.every((e) => e.session_id === pause.session_id)).toBe(true);
    expect(events.filter((e) => e.event === 'message').map((e) => e.data.content).join('')).toBe('Welcome Ada (36), plan pro; city .');
  });

  it('answers without streaming with the last event and the content joined', async () => {
    const agentId = await newAgent(`NonStream ${Date.now()}`, fixture('ragflow-begin-categorize'));
    const res = await rf('POST', `/agents/${agentId}/completions`, {
      question: 'I want a refund please',
      stream: false,
      inputs: { customer: { type: 'line', value: 'Grace' }, tier: { type: 'options', value: 'gold' } },
    });
    expect(res.json.code).toBe(0);
    expect(res.json.data).toMatchObject({
      event: 'workflow_finished',
      task_id: res.json.data.session_id,
      data: {
        content: 'Grace (gold): a refund agent will contact you.',
        reference: {},
        inputs: { customer: { type: 'line', value: 'Grace' } },
        outputs: { content: 'Grace (gold): a refund agent will contact you.' },
      },
    });
  });

  it('never pauses at Begin on RAGFlow’s routes, and takes Begin inputs on every pass', async () => {
    const agentId = await newAgent(`Triage ${Date.now()}`, fixture('ragflow-begin-categorize'));
    // two Begin fields: the query fills neither, and Begin does not ask for them
    const noInputs = await rf('POST', '/agents/chat/completions', { agent_id: agentId, query: 'hello', stream: false });
    expect(noInputs.json.data.event).toBe('workflow_finished');
    expect(noInputs.json.data.data.content).toBe(' (): thanks, noted.');
    const sessionId = noInputs.json.data.session_id;
    const answered = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: sessionId, stream: false, inputs: { customer: 'Lin', tier: 'basic' } });
    expect(answered.json.data.data.content).toBe('Lin (basic): thanks, noted.');
    // a later message routes again, the Begin values kept
    const later = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: sessionId, stream: false, query: 'where is my delivery' });
    expect(later.json.data.data.content).toBe('Lin (basic): your delivery is on its way.');
    expect((await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: 'e'.repeat(32), query: 'x', stream: false })).json).toEqual({ code: 102, message: 'Session not found!' });
    expect((await rf('POST', '/agents/chat/completions', { query: 'x' })).json).toEqual({ code: 101, message: '`agent_id` is required.' });
  });

  it('adds traces with return_trace', async () => {
    const agentId = await newAgent(`Trace ${Date.now()}`, fixture('ragflow-begin-categorize'));
    const res = await rf('POST', `/agents/${agentId}/completions`, { question: 'refund', stream: false, return_trace: true, inputs: { customer: 'A', tier: 'gold' } });
    expect(res.json.data.data.trace.map((t: { component_id: string }) => t.component_id)).toEqual(['begin', 'Categorize:RouteIt', 'Message:Refund']);
  });

  it('keeps another tenant out', async () => {
    const agentId = await newAgent(`Private ${Date.now()}`);
    const stranger = await api.addKey(newTenant(), 'admin');
    expect((await rf('POST', `/agents/${agentId}/completions`, { question: 'x', stream: false }, stranger)).json).toEqual({ code: 102, message: `You don't own the agent ${agentId}` });
    expect((await rf('GET', `/agents/${agentId}/sessions`, undefined, stranger)).json).toEqual({ code: 103, message: 'Make sure you have permission to access the agent.', data: false });
  });

  it('accepts uploads for file fields in RAGFlow’s descriptor shape', async () => {
    const agentId = await newAgent(`Upload ${Date.now()}`);
    const form = new FormData();
    form.append('file', new Blob(['some text'], { type: 'text/plain' }), 'a.txt');
    const res = await fetch(`${api.url}/api/v1/agents/${agentId}/upload`, { method: 'POST', headers: { authorization: `Bearer ${api.adminKey}` }, body: form });
    const json = (await res.json()) as { code: number; data: Record<string, unknown> };
    expect(json).toMatchObject({ code: 0, message: 'success', data: { name: 'a.txt', size: 9, extension: 'txt', mime_type: 'text/plain', preview_url: null, created_by: api.tenant } });
    expect(json.data.id).toMatch(/^file_[0-9a-f]{32}$/);
  });
});
