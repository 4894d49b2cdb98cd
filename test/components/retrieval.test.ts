/**
 * The Retrieval component: RAGFlow's params (and the ones refused), its outputs, the
 * references it adds, how it names knowledge bases, its failures, and what its call's record
 * keeps to answer the call again.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError, TransientError } from '../../lib/canvas';
import { ComponentError } from '../../lib/canvas/errors';
import { builtinComponents } from '../../lib/components';
import { retrieval } from '../../lib/components/retrieval';
import { chunkReference, citationId } from '../../lib/knowledge/format';
import type { DocAgg, RetrievalResult, RetrievedChunk } from '../../lib/knowledge/types';
import type { CompletedCall } from '../../lib/canvas/calls';
import { MAX_RECORDED_OTHER_DOCS_BYTES, recordedRetrieval, retrievalRecordResult, retrievalReplay } from '../../lib/components/recorded-retrieval';
import { retrievalTool } from '../../lib/tools/retrieval';
import { canvasFor, collect, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { townKnowledge } from '../helpers/knowledge';
import { testServices } from '../helpers/services';

const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';

function retrievalDsl(params: Record<string, unknown>, extra: { begin?: Record<string, unknown>; exception?: Record<string, unknown> } = {}) {
  return graph({
    begin: ['Begin', { mode: 'conversational', ...extra.begin }, ['Retrieval:Kb']],
    'Retrieval:Kb': ['Retrieval', { query: '{sys.query}', kb_ids: [FACTS], ...params, ...extra.exception }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Retrieval:Kb@formalized_content}'] }],
  });
}

function problemsOf(dsl: unknown) {
  try {
    compileWorkflow(dsl, builtinComponents);
  } catch (error) {
    expect(error).toBeInstanceOf(DslValidationError);
    return (error as DslValidationError).problems;
  }
  return [];
}

function outputsOf(events: Awaited<ReturnType<typeof turn>>, id = 'Retrieval:Kb') {
  const done = events.find((e) => e.event === 'node_finished' && e.data.component_id === id);
  return (done?.data as { outputs: { formalized_content: string; json: RetrievedChunk[] } }).outputs;
}

describe('Retrieval params', () => {
  it('takes RAGFlow’s defaults', () => {
    const p = retrieval.params.parse({});
    expect(p).toMatchObject({ similarity_threshold: 0.2, keywords_similarity_weight: 0.5, top_n: 8, top_k: 1024, dataset_ids: [], kb_ids: [], kb_vars: [], empty_response: '', retrieval_from: 'dataset', query: '' });
    // numbers written as text, as some DSLs carry them
    expect(retrieval.params.parse({ top_n: '3', similarity_threshold: '0.5' })).toMatchObject({ top_n: 3, similarity_threshold: 0.5 });
  });

  it('refuses every value it cannot honour at load time, each by name, all together', () => {
    const problems = problemsOf(retrievalDsl({
      use_kg: true,
      rerank_id: 'bge-reranker@BAAI',
      cross_languages: ['English', 'German'],
      toc_enhance: true,
      meta_data_filter: { method: 'manual', manual: [{ key: 'author', op: '=', value: 'Ada' }] },
      retrieval_from: 'memory',
      memory_ids: ['m1'],
      similarity_threshold: 1.5,
      top_n: 0,
    }));
    const fields = problems.filter((p) => p.component_id === 'Retrieval:Kb').map((p) => p.field);
    expect(fields.sort()).toEqual([
      'obj.params.cross_languages',
      'obj.params.memory_ids',
      'obj.params.meta_data_filter',
      'obj.params.rerank_id',
      'obj.params.retrieval_from',
      'obj.params.similarity_threshold',
      'obj.params.toc_enhance',
      'obj.params.top_n',
      'obj.params.use_kg',
    ]);
    const message = (field: string) => problems.find((p) => p.field === `obj.params.${field}`)?.message;
    expect(message('use_kg')).toBe('use_kg (knowledge graph retrieval) is not supported');
    expect(message('rerank_id')).toBe('rerank_id (a rerank model) is not supported');
    expect(message('retrieval_from')).toBe('Retrieval from RAGFlow\'s memory is not supported');
    expect(message('memory_ids')).toBe('Retrieval from RAGFlow\'s memory is not supported');
    expect(message('similarity_threshold')).toBe('must be between 0 and 1');
  });

  it('accepts the refused params at their defaults, and a metadata filter that filters nothing', () => {
    expect(problemsOf(retrievalDsl({ use_kg: false, rerank_id: '', cross_languages: [], toc_enhance: false, meta_data_filter: {}, memory_ids: [], retrieval_from: 'dataset' }))).toEqual([]);
    expect(problemsOf(retrievalDsl({ meta_data_filter: { method: 'disabled' } }))).toEqual([]);
  });

  it('refuses references to components that do not exist', () => {
    const problems = problemsOf(retrievalDsl({ query: '{Agent:Gone@content}', kb_ids: ['Nowhere:X@kb'] }));
    expect(problems).toEqual([
      { component_id: 'Retrieval:Kb', field: 'obj.params.query', message: 'references a missing component "Agent:Gone" in {Agent:Gone@content}' },
      { component_id: 'Retrieval:Kb', field: 'obj.params.dataset_ids', message: 'references a missing component "Nowhere:X"' },
    ]);
  });

  it('parses the Retrieval params of RAGFlow’s stock templates without refusing any', () => {
    const found = JSON.parse(readFileSync(resolve(__dirname, '../fixtures/ragflow-retrieval-params.json'), 'utf8')) as { template: string; where: string; kind: 'component' | 'tool'; params: unknown }[];
    expect(new Set(found.map((f) => f.template)).size).toBe(8);
    for (const f of found) {
      const parsed = (f.kind === 'component' ? retrieval.params : retrievalTool.params).safeParse(f.params);
      expect(parsed.success, `${f.template} ${f.where}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    }
  });

  const corpus = resolve(process.env.EASEL_RAGFLOW_CORPUS ?? resolve(__dirname, '../../../shared/ragflow'), 'agent/templates');
  it.runIf(existsSync(corpus))('finds the same Retrieval params in the RAGFlow corpus', () => {
    const fixture = JSON.parse(readFileSync(resolve(__dirname, '../fixtures/ragflow-retrieval-params.json'), 'utf8')) as unknown[];
    const uses = readdirSync(corpus).filter((f) => f.endsWith('.json') && readFileSync(resolve(corpus, f), 'utf8').includes('"Retrieval"'));
    expect(uses).toHaveLength(8);
    expect(fixture).toHaveLength(11);
  });
});

describe('Retrieval at run time', () => {
  it('outputs the chunks as knowledge text and JSON, and the Message’s message_end carries them as references', async () => {
    const knowledge = townKnowledge();
    const canvas = canvasFor(retrievalDsl({ top_n: 2 }), { services: testServices({ knowledge }) });
    const events = await turn(canvas, { query: 'When did the old bridge open?' });
    const { formalized_content, json } = outputsOf(events);
    expect(json.map((c) => c.content_with_weight)).toEqual(['The old bridge opened in 1932 and carries eight lanes.', 'The bridge was painted red in 1998.']);
    const [first, second] = json as [RetrievedChunk, RetrievedChunk];
    expect(formalized_content).toBe(
      `\nID: ${citationId(first.chunk_id)}\n├── Title: bridge.md\n└── Content:\nThe old bridge opened in 1932 and carries eight lanes.` +
        `\n\nID: ${citationId(second.chunk_id)}\n├── Title: bridge.md\n└── Content:\nThe bridge was painted red in 1998.`,
    );
    expect(messages(events)).toEqual([formalized_content]);
    const end = events.find((e) => e.event === 'message_end');
    expect(end?.data).toEqual({
      reference: {
        chunks: { [citationId(first.chunk_id)]: chunkReference(first), [citationId(second.chunk_id)]: chunkReference(second) },
        doc_aggs: { 'bridge.md': { doc_name: 'bridge.md', doc_id: first.doc_id, count: 2 } },
      },
    });
    expect(knowledge.queries[0]?.query).toEqual({ question: 'When did the old bridge open?', top_n: 2, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 });
    // the call is in the turn, its result without the chunks' text: their document by the index of a chunk from it
    const calls = canvas.lastTurnCalls.records.filter((r) => r.kind === 'retrieval');
    expect(calls).toEqual([expect.objectContaining({
      component_id: 'Retrieval:Kb',
      name: FACTS,
      status: 'ok',
      result: { total: 2, chunks: [{ chunk_id: first.chunk_id, similarity: first.similarity }, { chunk_id: second.chunk_id, similarity: second.similarity }], doc_aggs: [[0, 2]] },
    })]);
  });

  it('gives empty_response for an empty query and when nothing passes the threshold, without references', async () => {
    const knowledge = townKnowledge();
    const services = testServices({ knowledge });
    const empty = await turn(canvasFor(retrievalDsl({ empty_response: 'Nothing known.' }), { services }), { query: '   ' });
    expect(outputsOf(empty)).toEqual({ formalized_content: 'Nothing known.', json: [] });
    expect(knowledge.retrieves).toBe(0);
    const none = await turn(canvasFor(retrievalDsl({ empty_response: 'Nothing known.', similarity_threshold: 0.9 }), { services }), { query: 'bridge paint colour' });
    expect(outputsOf(none)).toEqual({ formalized_content: 'Nothing known.', json: [] });
    expect(none.find((e) => e.event === 'message_end')?.data).toEqual({});
    // a low threshold lets the same query through
    const some = await turn(canvasFor(retrievalDsl({ similarity_threshold: 0.1 }), { services }), { query: 'bridge paint colour' });
    expect(outputsOf(some).json.length).toBeGreaterThan(0);
  });

  it('takes a leading "user:" off the query, as RAGFlow does', async () => {
    const knowledge = townKnowledge();
    await turn(canvasFor(retrievalDsl({}), { services: testServices({ knowledge }) }), { query: 'USER: library hours' });
    expect(knowledge.queries[0]?.query.question).toBe('library hours');
  });

  it('names knowledge bases by id, alias, name and variables holding one or a list, in dataset_ids and kb_vars', async () => {
    const knowledge = townKnowledge();
    const services = testServices({ knowledge });
    const dsl = retrievalDsl(
      { kb_ids: [], dataset_ids: ['65cb5150819b11f08347047c16ec874f', 'begin@kb'], kb_vars: ['{sys.more}'] },
      { begin: { inputs: { kb: { name: 'KB', type: 'line', optional: false } } } },
    );
    const canvas = canvasFor(dsl, { services, beginRules: 'ragflow' });
    await turn(canvas, { query: 'cold winters', inputs: { kb: 'town-weather' } });
    expect(knowledge.queries[0]?.kbs).toEqual([FACTS, '60c53ed89acc11f0bc1e7a2a6d0b2755']);

    // a variable holding a list
    const listed = graph({
      begin: ['Begin', { mode: 'conversational' }, ['VariableAssigner:Set']],
      'VariableAssigner:Set': ['VariableAssigner', { variables: [{ variable: 'env.kbs', operator: 'overwrite', parameter: 'env.names' }] }, ['Retrieval:Kb']],
      'Retrieval:Kb': ['Retrieval', { query: 'sys.query', kb_vars: ['env.kbs'] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Retrieval:Kb@formalized_content}'] }],
    }, { variables: { kbs: { name: 'kbs', type: 'array<string>', value: [] }, names: { name: 'names', type: 'array<string>', value: ['town-weather', 'town-facts'] } } });
    await turn(canvasFor(listed, { services }), { query: 'cold' });
    expect(knowledge.queries[1]?.kbs).toEqual(['60c53ed89acc11f0bc1e7a2a6d0b2755', FACTS]);
  });

  it('fails naming itself and RAGFlow’s message when no dataset is selected or one does not exist', async () => {
    const services = testServices({ knowledge: townKnowledge() });
    const none = await turn(canvasFor(retrievalDsl({ kb_ids: [] }), { services }), { query: 'bridge' });
    expect(last(none)).toMatchObject({ event: 'workflow_failed', data: { error: { code: 'component_error', component_id: 'Retrieval:Kb', message: 'Retrieval:Kb: No dataset is selected.' } } });
    const missing = await turn(canvasFor(retrievalDsl({ kb_ids: [FACTS, 'nope', 'gone'] }), { services }), { query: 'bridge' });
    expect(last(missing)).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'Retrieval:Kb: Dataset(nope) does not exist. Dataset(gone) does not exist.' } } });
    // exception_method takes a permanent failure
    const handled = await turn(canvasFor(retrievalDsl({ kb_ids: ['nope'] }, { exception: { exception_method: 'comment', exception_default_value: 'no knowledge today' } }), { services }), { query: 'bridge' });
    expect(messages(handled)).toEqual(['no knowledge today']);
    expect(last(handled).event).toBe('workflow_finished');
    // without a knowledge service, a query fails the component, never the engine
    const unconfigured = await turn(canvasFor(retrievalDsl({}), { services: testServices() }), { query: 'bridge' });
    expect(last(unconfigured)).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'knowledge bases are not configured for this run' } } });
  });

  it('lets a transient failure of the knowledge service fail the turn, and a permanent one the component', async () => {
    const knowledge = townKnowledge();
    const services = testServices({ knowledge });
    knowledge.failNext(new TransientError('the index is busy'));
    const canvas = canvasFor(retrievalDsl({}), { services });
    await expect(collect(canvas.run({ query: 'bridge' }))).rejects.toBeInstanceOf(TransientError);
    knowledge.failNext(new ComponentError('the index is damaged'));
    const events = await turn(canvasFor(retrievalDsl({}), { services }), { query: 'bridge' });
    expect(last(events)).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'the index is damaged' } } });
    expect(knowledge.retrieves).toBe(2);
  });
});

describe('a retrieval’s record (recorded-retrieval.ts)', () => {
  const signal = new AbortController().signal;
  const search = async (question: string, top_n = 8) => {
    const knowledge = townKnowledge();
    return knowledge.retrieve(knowledge.bases, { question, top_n, top_k: 1024, similarity_threshold: 0.05, keywords_similarity_weight: 0.5 }, signal);
  };
  const completed = (result: RetrievalResult, replay?: unknown): CompletedCall => ({
    record: { v: 1, component_id: 'Retrieval:Kb', kind: 'retrieval', ordinal: 0, path: [], request_hash: 'h', status: 'ok', result: retrievalRecordResult(result) },
    ...(replay !== undefined ? { replay } : {}),
  });

  it('keeps the ids and scores, and each document by a chunk from it or, when none of the chunks is, in full', async () => {
    const result = await search('bridge winters library', 1);
    // one chunk, from one of the three documents that have chunks above the threshold
    expect(result.doc_aggs).toHaveLength(3);
    const recorded = retrievalRecordResult(result);
    expect(recorded.chunks).toEqual(result.chunks.map((c) => ({ chunk_id: c.chunk_id, similarity: c.similarity })));
    expect(JSON.stringify(recorded)).not.toContain(result.chunks[0]?.content_with_weight);
    const docs = recorded.doc_aggs ?? [];
    expect(docs).toHaveLength(result.doc_aggs.length);
    docs.forEach((doc, i) => {
      const agg = result.doc_aggs[i] as DocAgg;
      const from = result.chunks.findIndex((c) => c.doc_id === agg.doc_id);
      expect(doc).toEqual(from >= 0 ? [from, agg.count] : agg);
    });
    expect(docs.filter((d) => Array.isArray(d))).toHaveLength(1);
  });

  it('keeps no documents when those none of the chunks is from take more than its bound', async () => {
    const result = await search('bridge', 1);
    const many: DocAgg[] = Array.from({ length: 8 }, (_, i) => ({ doc_name: `report-${i}.pdf`, doc_id: `${i}`.repeat(32), count: 1 }));
    const recorded = retrievalRecordResult({ ...result, doc_aggs: [...result.doc_aggs, ...many] });
    expect(JSON.stringify(many).length).toBeGreaterThan(MAX_RECORDED_OTHER_DOCS_BYTES);
    expect(recorded).not.toHaveProperty('doc_aggs');
    expect(recordedRetrieval(completed({ ...result, doc_aggs: [...result.doc_aggs, ...many] }, { chunks: result.chunks }))).toBeUndefined();
    // a checkpoint carries them in full: answered
    expect(recordedRetrieval(completed({ ...result, doc_aggs: [...result.doc_aggs, ...many] }, retrievalReplay({ ...result, doc_aggs: [...result.doc_aggs, ...many] })))?.doc_aggs).toHaveLength(result.doc_aggs.length + 8);
  });

  it('answers with exactly what the search returned, given the chunks the record lists', async () => {
    const result = await search('bridge winter library', 3);
    const back = recordedRetrieval(completed(result, JSON.parse(JSON.stringify({ chunks: result.chunks })) as unknown));
    expect(back).toEqual(result);
  });

  it('does not answer with chunks that are not the record’s, from an older record, or for a failure', async () => {
    const result = await search('bridge winter library', 3);
    const [first, ...rest] = result.chunks as [RetrievedChunk, ...RetrievedChunk[]];
    const other = await search('library opens', 3);
    expect(recordedRetrieval(completed(result, { chunks: other.chunks }))).toBeUndefined();
    expect(recordedRetrieval(completed(result, { chunks: [{ ...first, similarity: first.similarity + 0.0001 }, ...rest] }))).toBeUndefined();
    expect(recordedRetrieval(completed(result, { chunks: rest }))).toBeUndefined();
    expect(recordedRetrieval(completed(result))).toBeUndefined();
    // written before documents were kept: ids and scores only
    const older = completed(result, { chunks: result.chunks });
    older.record.result = { total: result.total, chunks: result.chunks.map((c) => ({ chunk_id: c.chunk_id, similarity: c.similarity })) };
    expect(recordedRetrieval(older)).toBeUndefined();
    const failed = completed(result, { chunks: result.chunks });
    failed.record.status = 'error';
    expect(recordedRetrieval(failed)).toBeUndefined();
  });
});
