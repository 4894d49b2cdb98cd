import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransientError } from '../../lib/canvas';
import { canvasFor, fixture, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { TEST_API_KEY, testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});

describe('LLM streaming into a Message', () => {
  it('streams the model’s deltas through the Message and counts the turn’s usage', async () => {
    server.enqueue({ kind: 'text', text: 'Paris is the capital of France.', chunks: 5 });
    const calls = server.calls;
    const canvas = canvasFor(fixture('llm-stream'), { services: testServices({ openaiUrl: server.url }) });
    const events = await turn(canvas, { query: 'Capital of France?' });

    const deltas = events.filter((e) => e.event === 'message');
    expect(deltas.length).toBe(5);
    expect(messages(events)).toEqual(['Paris is the capital of France.']);
    expect(last(events)).toMatchObject({
      event: 'workflow_finished',
      data: { usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, calls: 1 } },
    });
    expect(server.calls - calls).toBe(1);

    const request = server.requests.at(-1)?.body;
    // unknown llm_id -> the default model; temperature sent because its flag is on, max_tokens not
    expect(request?.model).toBe('test-default');
    expect(request?.temperature).toBe(0.3);
    expect(request).not.toHaveProperty('max_tokens');
    expect(request?.messages[0]?.role).toBe('system');
    expect(request?.messages[0]?.content).toMatch(/^You are a concise assistant\. Today is \d{4}-\d\d-\d\d/);
    expect(request?.messages.at(-1)).toEqual({ role: 'user', content: 'Capital of France?' });
  });

  it('sends the conversation window on the next turn, without repeating the current query', async () => {
    server.enqueue({ kind: 'text', text: 'First answer.' }, { kind: 'text', text: 'Second answer.' });
    const canvas = canvasFor(fixture('llm-stream'), { services: testServices({ openaiUrl: server.url }) });
    await turn(canvas, { query: 'one' });
    await turn(canvas, { query: 'two' });
    const sent = server.requests.at(-1)?.body.messages.map((m) => [m.role, m.content]);
    expect(sent?.slice(1)).toEqual([
      ['user', 'one'],
      ['assistant', 'First answer.'],
      ['user', 'two'],
    ]);
  });

  it('keeps the API key out of state, events and errors', async () => {
    server.enqueue({ kind: 'text', text: 'fine' });
    const canvas = canvasFor(fixture('llm-stream'), { services: testServices({ openaiUrl: server.url }) });
    const events = await turn(canvas, { query: 'hello' });
    expect(server.requests.at(-1)?.headers.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(JSON.stringify(events)).not.toContain(TEST_API_KEY);
    expect(JSON.stringify(canvas.serialize())).not.toContain(TEST_API_KEY);
  });

  it('fails the turn as transient when the provider keeps failing, committing nothing', async () => {
    server.respond = () => ({ kind: 'status', status: 502, message: 'bad gateway' });
    try {
      const canvas = canvasFor(fixture('llm-stream'), { services: testServices({ openaiUrl: server.url }) });
      const before = JSON.stringify(canvas.serialize());
      await expect(turn(canvas, { query: 'x' })).rejects.toBeInstanceOf(TransientError);
      expect(before).toContain('not_started');
    } finally {
      server.respond = () => ({ kind: 'text', text: 'ok' });
    }
  });

  it('answers with structured output parsed from JSON when outputs.structured has a schema', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['LLM:Extract']],
      'LLM:Extract': [
        'LLM',
        {
          llm_id: '',
          sys_prompt: 'Extract the person.',
          prompts: [{ role: 'user', content: '{sys.query}' }],
          max_retries: 1,
          outputs: { structured: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'number' } } } },
        },
        ['Message:Show'],
      ],
      'Message:Show': ['Message', { content: ['{LLM:Extract@structured.name} is {LLM:Extract@structured.age}'] }],
    });
    server.enqueue({ kind: 'text', text: 'Sure! Here you go.' }, { kind: 'text', text: '```json\n{"name": "Ada", "age": 36}\n```' });
    const events = await turn(canvasFor(dsl, { services: testServices({ openaiUrl: server.url }) }), { query: 'Ada is 36' });
    expect(messages(events)).toEqual(['Ada is 36']);
    const [first, second] = server.requests.slice(-2).map((r) => r.body);
    expect(first?.response_format).toEqual({ type: 'json_object' });
    expect(first?.messages[0]?.content).toContain('"age"');
    expect(second?.messages.at(-1)?.content).toMatch(/not a JSON object/);
  });

  it('works offline on the echo model', async () => {
    const canvas = canvasFor(fixture('llm-stream'), { services: testServices() });
    const events = await turn(canvas, { query: 'say something' });
    expect(messages(events)).toEqual(['echo: say something']);
  });
});
