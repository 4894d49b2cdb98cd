/**
 * The official `openai` npm client against the OpenAI-compatible agent route: non-stream,
 * stream, continuing a session, and answering a form through metadata.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

let api: Served;
let agentId: string;
let triageId: string;

type Easel = { session_id: string; status: string; turn_number: number | null; next_input_hint: { tips: string; inputs: Record<string, unknown> } | null };

beforeAll(async () => {
  api = await serveApp(testEngine());
  for (const [title, dsl] of [['OpenAI intake', fixture('form-intake')], ['OpenAI triage', fixture('triage-categorize')]] as const) {
    await api.call('POST', '/api/v1/agents', { body: { title, dsl } });
  }
  const list = (await api.call('GET', '/api/v1/agents?orderby=create_time&desc=false')).json.data.canvas as { id: string; title: string }[];
  agentId = list.find((a) => a.title === 'OpenAI intake')?.id as string;
  triageId = list.find((a) => a.title === 'OpenAI triage')?.id as string;
});
afterAll(async () => {
  await api.close();
});

const client = (agent: string) => new OpenAI({ apiKey: api.adminKey, baseURL: `${api.url}/api/v1/agents_openai/${agent}`, maxRetries: 0 });

describe('OpenAI-compatible agent chat', () => {
  it('answers without streaming, naming the session as the id, with usage', async () => {
    const completion = await client(triageId).chat.completions.create({ model: 'any', messages: [{ role: 'user', content: 'a shipping question' }] });
    const easel = (completion as unknown as { easel: Easel }).easel;
    expect(completion.object).toBe('chat.completion');
    expect(completion.id).toMatch(/^[0-9a-f]{32}$/);
    expect(easel).toMatchObject({ session_id: completion.id, status: 'completed', turn_number: 1, next_input_hint: null });
    expect(completion.choices[0]?.message.content).toBe('Routing you to shipping (shipping).');
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(completion.model).toBe(triageId);
    expect(completion.usage?.total_tokens).toBeGreaterThan(0);
  });

  it('streams chunks that all carry the session id and the easel object, ending with finish_reason', async () => {
    const stream = await client(triageId).chat.completions.create({ model: 'any', stream: true, messages: [{ role: 'user', content: 'billing trouble' }] });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect(chunks.every((c) => (c as unknown as { easel?: Easel }).easel?.session_id === chunks[0]?.id)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Routing you to billing (billing).');
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe('stop');
    expect((last as unknown as { easel: Easel }).easel).toMatchObject({ status: 'completed', turn_number: 1 });
  });

  it('surfaces a pause as the tips, then continues the session and answers the form through metadata', async () => {
    const openai = client(agentId);
    const paused = await openai.chat.completions.create({ model: 'any', messages: [{ role: 'system', content: 'ignored' }, { role: 'user', content: 'register me' }] });
    const easel = (paused as unknown as { easel: Easel }).easel;
    expect(paused.choices[0]?.message.content).toBe('Tell us about yourself (you said: register me)');
    expect(paused.choices[0]?.finish_reason).toBe('stop');
    expect(easel.status).toBe('waiting_for_input');
    expect(Object.keys(easel.next_input_hint?.inputs ?? {})).toContain('plan');

    const answered = await openai.chat.completions.create({
      model: 'any',
      stream: true,
      messages: [{ role: 'user', content: 'here you go' }],
      metadata: { session_id: paused.id, inputs: JSON.stringify({ name: 'Ada', age: 36, plan: 'free' }) },
    });
    let text = '';
    let final: Easel | undefined;
    for await (const chunk of answered) {
      expect(chunk.id).toBe(paused.id);
      text += chunk.choices[0]?.delta.content ?? '';
      final = (chunk as unknown as { easel: Easel }).easel;
    }
    expect(text).toBe('Welcome Ada (36), plan free; city .');
    expect(final).toMatchObject({ session_id: paused.id, status: 'completed', turn_number: 2 });

    // a session id in the body continues the conversation too
    const again = await openai.chat.completions.create({ model: 'any', messages: [{ role: 'user', content: 'again' }], session_id: paused.id } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect((again as unknown as { easel: Easel }).easel).toMatchObject({ session_id: paused.id, turn_number: 3, status: 'waiting_for_input' });
  });

  it('needs no model, as RAGFlow, and answers a missing message in its envelope', async () => {
    const res = await api.call('POST', `/api/v1/agents_openai/${agentId}/chat/completions`, { body: { messages: [] } });
    expect(res.json).toEqual({ code: 102, message: 'You must provide at least one message.' });
    // RAGFlow streams only when asked: no `stream` is one JSON answer
    const bare = await api.call('POST', `/api/v1/agents_openai/${agentId}/chat/completions`, { body: { messages: [{ role: 'user', content: 'hi' }] } });
    expect(bare.headers.get('content-type')).toContain('application/json');
    expect(bare.json).toMatchObject({ object: 'chat.completion', model: agentId, id: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });
});
