/**
 * No silent stand-ins: a turn answered by the `echo` model (the default when no model is
 * configured) says so in its response (`stand_in`: the components it answered for and what it
 * means), and a Categorize it decided says its pick is not a real classification. A turn
 * answered by a real model, or by no model at all, carries no such field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ECHO_CLASSIFICATION_NOTICE } from '../../lib/components/categorize';
import { ECHO_STAND_IN_NOTICE } from '../../lib/turns/response';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let echoApi: Served;
let modelApi: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = () => ({ kind: 'text', text: 'refund' });
  [echoApi, modelApi] = await Promise.all([serveApp(testEngine()), serveApp(testEngine({ openaiUrl: model.url }))]);
});
afterAll(async () => {
  await Promise.all([echoApi.close(), modelApi.close(), model.close()]);
});

const TRIAGE = graph({
  begin: ['Begin', { mode: 'conversational' }, ['Categorize:Sort']],
  'Categorize:Sort': ['Categorize', { llm_id: 'm@Local', category_description: { refund: { description: 'money back', to: 'LLM:Reply' }, other: { description: 'anything else', to: 'Message:Other' } } }, []],
  'LLM:Reply': ['LLM', { llm_id: 'm@Local', prompts: [{ role: 'user', content: '{sys.query}' }] }, ['Message:Reply']],
  'Message:Reply': ['Message', { content: ['{LLM:Reply@content}'] }],
  'Message:Other': ['Message', { content: ['other'] }],
});
const PURE = graph({ begin: ['Begin', { mode: 'conversational' }, ['Message:Hi']], 'Message:Hi': ['Message', { content: ['hi'] }] });

async function turn(api: Served, dsl: unknown) {
  const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'triage', dsl } })).json.id as string;
  return (await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'I want a refund' } } })).json;
}

describe('stand-ins', () => {
  it('are named in the response of a turn the echo model answered, with the components it answered for', async () => {
    const r = await turn(echoApi, TRIAGE);
    expect(r.stand_in).toEqual({ model: 'echo', component_ids: expect.arrayContaining(['Categorize:Sort']), notice: ECHO_STAND_IN_NOTICE });
    const sorted = r.events.find((e: { event: string; data: { component_id?: string } }) => e.event === 'node_finished' && e.data.component_id === 'Categorize:Sort');
    expect(sorted.data.outputs.stand_in).toBe(ECHO_CLASSIFICATION_NOTICE);
  });

  it('are not mentioned when a real model answered, or no model was asked', async () => {
    const real = await turn(modelApi, TRIAGE);
    expect(real.stand_in).toBeUndefined();
    expect(JSON.stringify(real.events)).not.toContain('stand_in');
    expect(JSON.stringify(real.events)).toContain('refund');
    expect((await turn(echoApi, PURE)).stand_in).toBeUndefined();
  });
});
