/**
 * One retrieval as RAGFlow's Retrieval makes it, for the component and the Agent tool: the
 * knowledge bases resolved from the params (ids, names, and variables holding either, or a
 * list of them), a leading `user:` taken off the query, the search through the run's
 * knowledge service — or its answer from a record of the same call (a resumed batch, a replay
 * against another version) — and the call recorded in the turn with its result bounded (chunk
 * ids and scores, not their text: recorded-retrieval.ts). The caller turns the chunks into text
 * and references.
 */
import type { CallReport, CompletedCall } from '../canvas/calls';
import { ComponentError, TransientError } from '../canvas/errors';
import { valueToText } from '../canvas/references';
import type { KnowledgeBase, RetrievalQuery, RetrievalResult, RunKnowledge } from '../knowledge/types';
import { recordedRetrieval, retrievalRecordResult, retrievalReplay } from './recorded-retrieval';
import { datasetEntries, type RetrievalSettings } from './retrieval-params';

export interface SearchDeps {
  knowledge: RunKnowledge;
  signal: AbortSignal;
  /** The raw value of a variable reference (`begin@kb`, `{sys.kb}`). */
  get(reference: string): Promise<unknown>;
  /** Records the call in the turn. */
  record(report: CallReport): void;
  /** A record of this very call that may answer it (`ctx.recordedCall`); absent: always search. */
  recorded?(call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept: (call: CompletedCall) => boolean): CompletedCall | undefined;
  /** Who searches, as error messages name it: the component's id. */
  who: string;
}

export interface SearchOutcome {
  kbs: KnowledgeBase[];
  result: RetrievalResult;
}

/**
 * Searches the knowledge bases the params name for `query`. ComponentError when none is
 * selected or one does not exist (RAGFlow's messages: "No dataset is selected.",
 * "Dataset(x) does not exist."); the knowledge service's TransientError passes through.
 * A call answered from its record is recorded again, marked `replayed`.
 */
export async function searchKnowledge(p: RetrievalSettings, query: string, deps: SearchDeps): Promise<SearchOutcome> {
  const wanted = await wantedBases(p, deps);
  if (wanted.length === 0) throw new ComponentError(`${deps.who}: No dataset is selected.`);
  const { found, missing } = await deps.knowledge.resolve(wanted);
  if (missing.length > 0) throw new ComponentError(`${deps.who}: ${missing.map((m) => `Dataset(${m}) does not exist.`).join(' ')}`);
  if (found.length === 0) throw new ComponentError(`${deps.who}: No dataset is selected.`);

  const request: RetrievalQuery = {
    // RAGFlow takes a role prefix off the query ("user: ...")
    question: query.replace(/^user[:：]\s*/i, ''),
    top_n: p.top_n,
    top_k: p.top_k,
    similarity_threshold: p.similarity_threshold,
    keywords_similarity_weight: p.keywords_similarity_weight,
  };
  const call = { kind: 'retrieval' as const, name: found.map((kb) => kb.id).join(','), request: { kb_ids: found.map((kb) => kb.id), ...request } };
  const answered = recordedRetrieval(deps.recorded?.(call, (c) => recordedRetrieval(c) !== undefined));
  if (answered) {
    deps.record({ ...call, result: retrievalRecordResult(answered), replay: retrievalReplay(answered), replayed: true });
    return { kbs: found, result: answered };
  }
  let result: RetrievalResult;
  try {
    result = await deps.knowledge.retrieve(found, request, deps.signal);
  } catch (error) {
    deps.record({ ...call, error: error instanceof Error ? error.message : String(error) });
    if (error instanceof TransientError || error instanceof ComponentError) throw error;
    throw new ComponentError(`${deps.who}: ${error instanceof Error ? error.message : 'the retrieval failed'}`, { cause: error });
  }
  // the chunks in full ride along for a checkpoint taken inside the batch, never into the turn's records
  deps.record({ ...call, result: retrievalRecordResult(result), replay: retrievalReplay(result) });
  return { kbs: found, result };
}

/** Literal entries as they are, variables by their values; each once, in order. */
async function wantedBases(p: RetrievalSettings, deps: SearchDeps): Promise<string[]> {
  const { literal, variables } = datasetEntries(p);
  const wanted = [...literal];
  for (const variable of variables) {
    const value = await deps.get(variable);
    for (const item of Array.isArray(value) ? value : [value]) {
      const text = valueToText(item).trim();
      if (text) wanted.push(text);
    }
  }
  return [...new Set(wanted)];
}
