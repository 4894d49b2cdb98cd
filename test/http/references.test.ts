/**
 * A turn's references on every surface: the native turn's `message_end`, RAGFlow's SSE and
 * whole answers, the OpenAI-compatible chunks and answers, and RAGFlow's session view (its
 * messages and its `dsl.retrieval`) — through the app, on a real HTTP server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { townKnowledge } from '../helpers/knowledge';
import { OpenAiServer } from '../llm/openai-server';

const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';
let api: Served;
let model: OpenAiServer;

beforeAll(async () => {
  model = await OpenAiServer.start();
  // cites the first knowledge block it is shown (the system prompt's example is none)
  model.respond = (body) => {
    const text = body.messages.filter((m) => m.role !== 'system').map((m) => m.content).join('\n');
    const id = /\nID: (\d+)/.exec(text)?.[1];
    return { kind: 'text', text: id ? `The bridge opened in 1932 [ID:${id}].` : 'I know nothing.', chunks: 2 };
  };
  api = await serveApp(testEngine({ openaiUrl: model.url, knowledge: townKnowledge() }));
});
afterAll(async () => {
  await api.close();
  await model.close();
});

const DSL = graph({
  begin: ['Begin', { mode: 'conversational', prologue: 'Ask me about the town.' }, ['Retrieval:Kb']],
  'Retrieval:Kb': ['Retrieval', { query: '{sys.query}', kb_ids: [FACTS], similarity_threshold: 0.1 }, ['LLM:Answer']],
  'LLM:Answer': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer from the knowledge.', prompts: [{ role: 'user', content: 'Knowledge:{Retrieval:Kb@formalized_content}\n\nQuestion: {sys.query}' }] }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{LLM:Answer@content}'] }],
});

const rf = (method: string, path: string, body?: unknown) => api.call(method, `/api/v1${path}`, body === undefined ? {} : { body });

function dataFrames(text: string): Record<string, any>[] {
  return text.split('\n\n').filter((f) => f.startsWith('data:') && !f.includes('[DONE]')).map((f) => JSON.parse(f.slice(5).trim()));
}

interface Reference {
  chunks: Record<string, Record<string, unknown>>;
  doc_aggs: Record<string, Record<string, unknown>>;
}

/** One cited chunk of bridge.md: what every surface must carry. */
function expectCited(reference: Reference | undefined): string {
  const keys = Object.keys(reference?.chunks ?? {});
  expect(keys).toHaveLength(1);
  const key = keys[0] as string;
  expect(reference?.chunks[key]).toMatchObject({ content: 'The old bridge opened in 1932 and carries eight lanes.', document_name: 'bridge.md', dataset_id: FACTS });
  expect(Object.keys(reference?.doc_aggs ?? {})).toEqual(['bridge.md']);
  return key;
}

let agentId: string;
beforeAll(async () => {
  const created = await rf('POST', '/agents', { title: `References ${Date.now()}`, dsl: DSL });
  expect(created.json.code).toBe(0);
  agentId = created.json.data.id as string;
});

describe('references on the surfaces', () => {
  it('the native turn’s message_end carries them', async () => {
    const wf = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'refs', dsl: DSL } });
    const res = await api.call('POST', `/workflows/v1/workflows/${wf.json.id}/execute`, { body: { run_input: { query: 'When did the old bridge open?' } } });
    expect(res.status).toBe(200);
    const end = res.json.events.find((e: { event: string }) => e.event === 'message_end');
    expectCited(end.data.reference);
  });

  it('RAGFlow’s SSE sends them on message_end; its whole answer in data.reference', async () => {
    const streamed = await rf('POST', `/agents/${agentId}/completions`, { question: 'When did the old bridge open?', stream: true });
    const end = dataFrames(streamed.text).find((f) => f.event === 'message_end');
    const key = expectCited(end?.data.reference);
    expect(String(end?.data.reference.chunks[key].id)).toMatch(/^[0-9a-f]{16}$/);

    const whole = await rf('POST', `/agents/${agentId}/completions`, { question: 'When did the old bridge open?', stream: false });
    expect(whole.json.code, JSON.stringify(whole.json).slice(0, 600)).toBe(0);
    expect(whole.json.data.data.content).toMatch(/^The bridge opened in 1932 \[ID:\d+\]\.$/);
    // the answer is the last event, as RAGFlow's, its data with the turn's content and references
    expectCited(whole.json.data.data.reference);
  });

  it('the OpenAI-compatible answer has message.reference; a stream, a chunk with delta.reference', async () => {
    const whole = await rf('POST', `/agents_openai/${agentId}/chat/completions`, { model: 'x', messages: [{ role: 'user', content: 'When did the old bridge open?' }] });
    expectCited(whole.json.choices[0].message.reference);

    const streamed = await rf('POST', `/agents_openai/${agentId}/chat/completions`, { model: 'x', stream: true, messages: [{ role: 'user', content: 'When did the old bridge open?' }] });
    const chunks = streamed.text.split('\n\n').filter((f) => f.startsWith('data: {')).map((f) => JSON.parse(f.slice(6)));
    const withReference = chunks.filter((c) => c.choices[0].delta.reference);
    expect(withReference).toHaveLength(1);
    expect(withReference[0].choices[0].delta.content).toBe('');
    expectCited(withReference[0].choices[0].delta.reference);
    // no chunk before it lacks its text
    expect(chunks.map((c) => c.choices[0].delta.content ?? '').join('')).toMatch(/^The bridge opened in 1932 \[ID:\d+\]\.$/);
  });

  it('a RAGFlow session lists each assistant message’s references with their citation ids, and its dsl the pass’s', async () => {
    const session = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data;
    const asked = await rf('POST', `/agents/${agentId}/completions`, { question: 'When did the old bridge open?', stream: false, session_id: session.id });
    // a created session is on RAGFlow's agent path: the answer is its message_end
    expect(asked.json.data.event).toBe('message_end');
    expectCited(asked.json.data.data.reference);
    await rf('POST', `/agents/${agentId}/completions`, { question: 'zeppelin hangar?', stream: false, session_id: session.id });
    const view = (await rf('GET', `/agents/${agentId}/sessions/${session.id}`)).json.data;
    const [prologue, q1, a1, q2, a2] = view.messages;
    expect(prologue).toEqual({ role: 'assistant', content: 'Ask me about the town.' });
    expect(q1).toEqual({ role: 'user', content: 'When did the old bridge open?' });
    const cited = /\[ID:(\d+)\]/.exec(a1.content)?.[1];
    expect(a1.reference).toEqual([
      {
        id: expect.stringMatching(/^[0-9a-f]{16}$/),
        content: 'The old bridge opened in 1932 and carries eight lanes.',
        document_id: expect.any(String),
        document_name: 'bridge.md',
        dataset_id: FACTS,
        image_id: '',
        positions: [],
        citation_id: cited,
      },
    ]);
    expect(q2).toEqual({ role: 'user', content: 'zeppelin hangar?' });
    // a message without references has none
    expect(a2).toEqual({ role: 'assistant', content: 'I know nothing.' });
    // the last pass found nothing: its dsl has no references
    expect(view.dsl.retrieval).toEqual([]);
    expect(view.dsl.history.every((h: unknown[]) => h.length === 2)).toBe(true);

    // RAGFlow's input form of a Retrieval
    expect((await rf('GET', `/agents/${agentId}/components/Retrieval:Kb/input-form`)).json).toMatchObject({ code: 0, data: { query: { name: 'Query', type: 'line' } } });

    const other = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data;
    await rf('POST', `/agents/${agentId}/completions`, { question: 'When did the old bridge open?', stream: false, session_id: other.id });
    const second = (await rf('GET', `/agents/${agentId}/sessions/${other.id}`)).json.data;
    expect(second.dsl.retrieval).toHaveLength(1);
    expectCited(second.dsl.retrieval[0]);
  });
});
