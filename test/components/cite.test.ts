/**
 * `cite` of LLM and Agent, and Retrieval as an Agent's tool, against a local server speaking
 * the OpenAI protocol: the citation prompt only when the pass has references, the references
 * narrowed to what the answer cited, the tool offered as RAGFlow offers it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TransientError } from '../../lib/canvas';
import { citationId, citationPrompt, formatChunks } from '../../lib/knowledge/format';
import { RETRIEVAL_DESCRIPTION, RETRIEVAL_QUERY_DESCRIPTION } from '../../lib/tools/retrieval';
import { canvasFor, collect, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { type MemoryKnowledge, townKnowledge } from '../helpers/knowledge';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';

const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';

let server: OpenAiServer;
let knowledge: MemoryKnowledge;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  knowledge = townKnowledge();
});

const services = () => testServices({ openaiUrl: server.url, knowledge });

/** The citation ids of the knowledge blocks a request carries (the system prompt's example is none). */
function idsIn(body: { messages: { role: string; content: string }[] }): string[] {
  const text = body.messages.filter((m) => m.role !== 'system').map((m) => m.content).join('\n');
  return [...text.matchAll(/\nID: (\d+)/g)].map((m) => m[1] as string);
}

function ragDsl(llm: Record<string, unknown> = {}, withRetrieval = true) {
  const answer = ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer from the knowledge.', prompts: [{ role: 'user', content: 'Knowledge:\n{Retrieval:Kb@formalized_content}\n\nQuestion: {sys.query}' }], ...llm }, ['Message:Out']] as const;
  return graph({
    begin: ['Begin', { mode: 'conversational' }, [withRetrieval ? 'Retrieval:Kb' : 'LLM:Answer']],
    ...(withRetrieval ? { 'Retrieval:Kb': ['Retrieval', { query: '{sys.query}', kb_ids: [FACTS], similarity_threshold: 0.1 }, ['LLM:Answer']] as [string, Record<string, unknown>, string[]] } : {}),
    'LLM:Answer': [answer[0], answer[1], [...answer[2]]],
    'Message:Out': ['Message', { content: ['{LLM:Answer@content}'] }],
  });
}

const referenceOf = (events: Awaited<ReturnType<typeof turn>>) => (events.find((e) => e.event === 'message_end')?.data as { reference?: { chunks: Record<string, { id: string }>; doc_aggs: Record<string, unknown> } }).reference;

describe('LLM cite', () => {
  it('adds nothing to the prompt of a workflow without references', async () => {
    server.respond = () => ({ kind: 'text', text: 'Plain answer.' });
    const events = await turn(canvasFor(ragDsl({ prompts: [{ role: 'user', content: '{sys.query}' }] }, false), { services: services() }), { query: 'hello' });
    expect(messages(events)).toEqual(['Plain answer.']);
    expect(server.requests.at(-1)?.body.messages[0]).toEqual({ role: 'system', content: 'Answer from the knowledge.' });
    expect(referenceOf(events)).toBeUndefined();
  });

  it('asks to cite when the pass has references, and sends on only the chunks the answer cited', async () => {
    server.respond = (body) => ({ kind: 'text', text: `It is so [ID:${idsIn(body)[0]}].`, chunks: 3 });
    const canvas = canvasFor(ragDsl(), { services: services() });
    const events = await turn(canvas, { query: 'When did the bridge open, and when is the library open?' });
    const sent = server.requests.at(-1)?.body;
    expect(sent?.messages[0]).toEqual({ role: 'system', content: `Answer from the knowledge.\n\n${citationPrompt()}` });
    const ids = idsIn(sent as { messages: { role: string; content: string }[] });
    expect(ids.length).toBeGreaterThan(1);
    const reference = referenceOf(events);
    expect(Object.keys(reference?.chunks ?? {})).toEqual([ids[0]]);
    const citedDoc = (reference?.chunks[ids[0] as string] as { document_name?: string } | undefined)?.document_name;
    expect(Object.keys(reference?.doc_aggs ?? {})).toEqual([citedDoc]);
    // the state keeps what was sent
    expect(canvas.serialize().retrieval).toEqual(reference);
  });

  it('keeps every reference when the answer cites none, and asks nothing with cite off', async () => {
    server.respond = () => ({ kind: 'text', text: 'No citation here.' });
    const all = await turn(canvasFor(ragDsl(), { services: services() }), { query: 'bridge library' });
    const full = referenceOf(all);
    expect(Object.keys(full?.chunks ?? {}).length).toBeGreaterThan(1);

    const off = await turn(canvasFor(ragDsl({ cite: false }), { services: services() }), { query: 'bridge library' });
    expect(server.requests.at(-1)?.body.messages[0]).toEqual({ role: 'system', content: 'Answer from the knowledge.' });
    expect(referenceOf(off)).toEqual(full);
  });

  it('narrows without a Message streaming it too (the answer called at once)', async () => {
    server.respond = (body) => ({ kind: 'text', text: `Red since 1998 [ID:${idsIn(body).at(-1)}].` });
    const dsl = ragDsl();
    const components = dsl.components as Record<string, { obj: { params: Record<string, unknown> } }>;
    (components['LLM:Answer'] as { obj: { params: Record<string, unknown> } }).obj.params.exception_method = 'comment';
    const canvas = canvasFor(dsl, { services: services() });
    await turn(canvas, { query: 'bridge painted red' });
    expect(Object.keys(canvas.serialize().retrieval?.chunks ?? {})).toHaveLength(1);
  });
});

function agentDsl(toolParams: Record<string, unknown> = { kb_ids: [FACTS] }) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Helper']],
    'Agent:Helper': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You help with questions about the town.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools: [{ component_name: 'Retrieval', name: 'Town facts', params: { description: 'Facts about the town.', similarity_threshold: 0.1, top_n: 4, ...toolParams } }],
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Helper@content}'] }],
  });
}

describe('Retrieval as an Agent tool', () => {
  it('is offered as search_my_dateset, hands the knowledge text to the model, and its chunks become the cited references', async () => {
    server.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'bridge opened' } }] });
    server.respond = (body) => ({ kind: 'text', text: `It opened in 1932 [ID:${idsIn(body)[0]}].`, chunks: 2 });
    const before = server.calls;
    const canvas = canvasFor(agentDsl(), { services: services() });
    const events = await turn(canvas, { query: 'When did the bridge open?' });
    expect(server.calls - before).toBe(2);
    const [first, second] = server.requests.slice(-2).map((r) => r.body);
    expect(first?.tools?.[0]?.function).toEqual({
      name: 'search_my_dateset_0',
      description: 'Facts about the town.',
      parameters: { type: 'object', properties: { query: { type: 'string', description: RETRIEVAL_QUERY_DESCRIPTION } }, required: ['query'] },
    });
    // no references yet: no citation prompt in the first round
    expect(first?.messages[0]).toEqual({ role: 'system', content: 'You help with questions about the town.' });
    expect(knowledge.queries.map((q) => q.query.question)).toEqual(['bridge opened']);
    const asked = knowledge.queries[0]?.query;
    if (!asked) throw new Error('no search was made');
    // the same search again, to know what the tool found
    const found = await knowledge.retrieve(knowledge.bases.slice(0, 1), asked, new AbortController().signal);
    expect(second?.messages.at(-1)).toEqual({ role: 'tool', content: formatChunks(found.chunks), tool_call_id: expect.any(String) });
    expect(second?.messages[0]).toEqual({ role: 'system', content: `You help with questions about the town.\n\n${citationPrompt()}` });

    const cited = citationId((found.chunks[0] as { chunk_id: string }).chunk_id);
    expect(messages(events)).toEqual([`It opened in 1932 [ID:${cited}].`]);
    expect(Object.keys(referenceOf(events)?.chunks ?? {})).toEqual([cited]);
    // the tool call is recorded with the chunks it found: small, they are kept in full (a replay answers the call from them)
    const call = canvas.lastTurnCalls.records.find((r) => r.kind === 'tool');
    expect(call?.result).toEqual({
      content: formatChunks(found.chunks),
      references: { chunks: found.chunks.map((c) => expect.objectContaining({ id: c.chunk_id, content: (c as { content_with_weight: string }).content_with_weight })), doc_aggs: expect.any(Array) },
    });
  });

  it('uses RAGFlow’s description when the entry has none, and tells the model when nothing is found', async () => {
    server.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'zeppelin hangar' } }] }, { kind: 'text', text: 'I found nothing.' });
    const events = await turn(canvasFor(agentDsl({ kb_ids: [FACTS], description: '', similarity_threshold: 0.5 }), { services: services() }), { query: 'zeppelins?' });
    const [first, second] = server.requests.slice(-2).map((r) => r.body);
    expect(first?.tools?.[0]?.function.description).toBe(RETRIEVAL_DESCRIPTION);
    expect(second?.messages.at(-1)?.content).toBe('Nothing relevant was found in the knowledge bases.');
    expect(referenceOf(events)).toBeUndefined();
  });

  it('tells the model about a knowledge base that does not exist, and fails the turn on a transient failure', async () => {
    server.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'bridge' } }] }, { kind: 'text', text: 'No such knowledge.' });
    const events = await turn(canvasFor(agentDsl({ kb_ids: ['nope'] }), { services: services() }), { query: 'bridge?' });
    expect(server.requests.at(-1)?.body.messages.at(-1)?.content).toBe('error: Agent:Helper (Town facts): Dataset(nope) does not exist.');
    expect(last(events).event).toBe('workflow_finished');

    knowledge.failNext(new TransientError('the index is busy'));
    server.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'bridge' } }] });
    await expect(collect(canvasFor(agentDsl(), { services: services() }).run({ query: 'bridge?' }))).rejects.toBeInstanceOf(TransientError);
  });

  it('reads knowledge bases from the run’s variables', async () => {
    server.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'winters' } }] }, { kind: 'text', text: 'Cold.' });
    const dsl = agentDsl({ kb_ids: ['{env.kb}'] });
    (dsl as { variables?: unknown }).variables = { kb: { name: 'kb', type: 'string', value: 'town-weather' } };
    await turn(canvasFor(dsl, { services: services() }), { query: 'winters?' });
    expect(knowledge.queries.at(-1)?.kbs).toEqual(['60c53ed89acc11f0bc1e7a2a6d0b2755']);
  });
});
