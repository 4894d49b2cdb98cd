/**
 * RAGFlow's stock templates that search a knowledge base, imported unchanged through RAGFlow's
 * API, then bound to knowledge bases of the `local` backend by a new version, with documents
 * uploaded through the native routes: a question whose answer is in one document gets a reply
 * whose references name that document's chunk. The model is a local OpenAI-speaking server that
 * answers as a model would: it picks the category offered, calls the search tool it is given,
 * and cites the knowledge block that holds the answer.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { FAQ_TXT, GUIDE_MD, multipart } from '../helpers/knowledge-docs';
import { OpenAiServer, type RecordedRequest } from '../llm/openai-server';

const CORPUS = resolve(process.env.EASEL_RAGFLOW_CORPUS ?? resolve(__dirname, '../../../shared/ragflow'));
const template = (name: string) => resolve(CORPUS, `agent/templates/${name}.json`);
const STARTER = template('your_starter_dataset_chatbot');
const SERVICE = template('smart_customer_service_specialist');

let api: Served;
let model: OpenAiServer;

/** Each knowledge block of a prompt: `ID: <n>` … `└── Content:` then the chunk's text. */
function knowledgeBlocks(text: string): { id: string; content: string }[] {
  return [...text.matchAll(/ID: (\d+)\n[\s\S]*?└── Content:\n([\s\S]*?)(?=\nID: \d+\n|$)/g)].map((m) => ({ id: m[1] ?? '', content: m[2] ?? '' }));
}

const contentOf = (m: RecordedRequest['body']['messages'][number]) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''));

/** What a model would answer: the category offered, a search when it has the tool and no result yet, else a cited answer. */
function answer(body: RecordedRequest['body']) {
  const all = body.messages.map(contentOf).join('\n');
  if (all.includes('Product Usage Guide') && all.includes('Book Installation')) return { kind: 'text' as const, text: 'Product Usage Guide' };
  const tool = body.tools?.find((t) => t.function.name.startsWith('search_my_dateset'));
  const searched = body.messages.some((m) => m.role === 'tool');
  const question = [...body.messages].reverse().find((m) => m.role === 'user');
  // the keywords of the question, as the tool's description asks (the template wraps it: "The user query is …")
  const keywords = contentOf(question ?? { role: 'user', content: '' }).replace(/^.*query is\s*/is, '');
  if (tool && !searched) return { kind: 'tools' as const, calls: [{ name: tool.function.name, arguments: { query: keywords } }] };
  // the user's question, not the knowledge shown with it, says which fact answers it
  const wanted = /descal/i.test(contentOf(question ?? { role: 'user', content: '' })) ? 'citric acid' : 'two years';
  const block = knowledgeBlocks(all).find((b) => b.content.includes(wanted));
  return { kind: 'text' as const, text: block ? `From the guide: ${wanted} [ID:${block.id}].` : 'I found nothing about that.' };
}

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = answer;
  // serveApp wires runs to the knowledge bases its routes manage, as the runtime does
  api = await serveApp(testEngine({ openaiUrl: model.url }));
});
afterAll(async () => {
  await api?.close();
  await model?.close();
});

/** A local knowledge base holding the espresso guide and the FAQ, parsed on upload. */
async function espressoKnowledge(name: string): Promise<string> {
  const made = await api.call('POST', '/workflows/v1/knowledge-bases', { body: { name } });
  expect(made.status).toBe(201);
  const { body, type } = multipart([
    { name: 'guide.md', content: GUIDE_MD, type: 'text/markdown' },
    { name: 'faq.txt', content: FAQ_TXT, type: 'text/plain' },
  ]);
  const res = await fetch(`${api.url}/workflows/v1/knowledge-bases/${made.json.id}/documents`, { method: 'POST', headers: { authorization: `Bearer ${api.adminKey}`, 'content-type': type }, body });
  const uploaded = (await res.json()) as { items: { status: string }[] };
  expect(uploaded.items.map((d) => d.status)).toEqual(['DONE', 'DONE']);
  return made.json.id as string;
}

/** Every Retrieval of the DSL, as a component or as an Agent's tool, names `kbId`. */
function bound(dsl: any, kbId: string): unknown {
  const copy = structuredClone(dsl);
  for (const c of Object.values(copy.components) as any[]) {
    const params = c.obj.params;
    if (c.obj.component_name === 'Retrieval') params.kb_ids = [kbId];
    for (const tool of params.tools ?? []) if (tool.component_name === 'Retrieval') tool.params.kb_ids = [kbId];
  }
  return copy;
}

type Chunk = { id: string; content: string; document_name: string; dataset_id: string };

async function importAndAsk(file: string, question: string) {
  const dsl = (JSON.parse(readFileSync(file, 'utf8')) as { dsl: unknown }).dsl;
  const created = await api.call('POST', '/api/v1/agents', { body: { title: `${file} ${Math.random()}`, dsl } });
  expect(created.json.code).toBe(0);
  const agentId = created.json.data.id as string;
  const kbId = await espressoKnowledge(`Espresso ${Math.random().toString(16).slice(2)}`);
  const updated = await api.call('PUT', `/api/v1/agents/${agentId}`, { body: { dsl: bound(dsl, kbId) } });
  expect(updated.json).toMatchObject({ code: 0, message: 'success' });
  const asked = await api.call('POST', '/api/v1/agents/chat/completions', { body: { agent_id: agentId, query: question, stream: false } });
  expect(asked.json.code).toBe(0);
  return { kbId, created, data: asked.json.data.data as { content: string; reference: { chunks: Record<string, Chunk>; doc_aggs: Record<string, { doc_name: string }> } } };
}

describe.skipIf(!existsSync(STARTER) || !existsSync(SERVICE))('stock templates over a local knowledge base', () => {
  it('your_starter_dataset_chatbot: its Agent searches through its Retrieval tool and the reply cites the guide’s warranty chunk', async () => {
    const before = model.requests.length;
    const { kbId, data } = await importAndAsk(STARTER, 'What is the warranty?');
    expect(data.content).toMatch(/two years \[ID:\d+\]/);
    // the search found the FAQ's grinder warranty too: the model was shown both
    const shown = model.requests.slice(before).flatMap((r) => r.body.messages.filter((m) => m.role === 'tool').map(contentOf)).join('\n');
    expect(shown).toContain('warranty of two years');
    expect(shown).toContain('separate warranty of one year');
    const chunks = Object.values(data.reference.chunks);
    // only the cited chunk: the FAQ's grinder warranty was found too, but not cited
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ document_name: 'guide.md', dataset_id: kbId });
    expect(chunks[0]?.content).toContain('warranty of two years');
    expect(Object.keys(data.reference.doc_aggs)).toEqual(['guide.md']);
  });

  it('smart_customer_service_specialist: imported with a warning for its unknown datasets, then the usage guide branch cites the descaling chunk', async () => {
    const { kbId, created, data } = await importAndAsk(SERVICE, 'How often should I descale the machine?');
    // the template's dataset ids name no knowledge base here: imported all the same, with a warning
    expect(created.json.message).toContain('a5aaec4a819b11f095f1047c16ec874f');
    expect(data.content).toMatch(/citric acid \[ID:\d+\]/);
    const chunks = Object.values(data.reference.chunks);
    expect(chunks.length).toBeGreaterThanOrEqual(1);
    expect(chunks.every((c) => c.document_name === 'guide.md' && c.dataset_id === kbId)).toBe(true);
    expect(chunks.some((c) => c.content.includes('citric acid'))).toBe(true);
  });
});
