/**
 * The knowledge service: what the APIs manage (`KnowledgeAdmin`) and what a run searches
 * (`RunKnowledge`), over the three backends. Knowledge bases and documents live in the store
 * (lib/store/knowledge*.ts); `local` ones are parsed, chunked and indexed here
 * (lib/knowledge/local); `ragflow` and `bedrock` ones are searched through the remote clients
 * the host passes in.
 *
 * @example
 *   const knowledge = createKnowledge({ store, guard, secretsFor, llm: config.llm });
 *   const kb = await knowledge.create('acme', { name: 'Handbook', backend: 'local' });
 *   const { found } = await knowledge.forTenant('acme').resolve(['Handbook']);
 */
import { randomBytes } from 'node:crypto';
import { ComponentError } from '../canvas/errors';
import { EaselError } from '../errors';
import type { LlmSettings } from '../llm/models';
import type { SsrfGuard } from '../outbound/ssrf';
import type { StoreContext } from '../store/dynamo';
import { NotFoundError } from '../store/errors';
import {
  createKnowledgeBase,
  deleteKnowledgeBase,
  getKnowledgeBase,
  KnowledgeBaseChangedError,
  type KnowledgeBaseChange,
  listKnowledgeBases,
  nameKey,
  resolveKnowledgeBases,
  updateKnowledgeBase,
} from '../store/knowledge';
import { deleteDocuments, getDocument, listDocumentChunks, listDocuments, type StoredChunk } from '../store/knowledge-documents';
import { DEFAULT_INDEX_CACHE_BYTES, MAX_DOCUMENTS_PER_PARSE } from './limits';
import { LocalBackend } from './local/backend';
import { IndexCache } from './local/index-cache';
import type {
  ChunkView,
  DocAgg,
  KnowledgeAdmin,
  KnowledgeBase,
  KnowledgeBasePatch,
  ListOptions,
  NewKnowledgeBase,
  Page,
  RemoteRetriever,
  RetrievalQuery,
  RetrievalResult,
  RunKnowledge,
} from './types';
import { parseNewKnowledgeBase, parsePatch, withChunkingDefaults } from './validation';

export interface KnowledgeDeps {
  store: StoreContext;
  /** Every URL a tenant supplies (a RAGFlow server's) goes through it. */
  guard: SsrfGuard;
  /** The tenant's secrets by name (`{secret.NAME}` in a knowledge base's settings). */
  secretsFor(tenant: string): (name: string) => string | undefined | Promise<string | undefined>;
  /** The model configuration embedding models come from. */
  llm: LlmSettings;
  /** Clients of the remote backends; a knowledge base of a kind without one cannot be searched. */
  remote?: Partial<Record<'ragflow' | 'bedrock', RemoteRetriever>>;
  /** Epoch ms. @default Date.now */
  now?: () => number;
  /** Bytes of deserialized local indexes kept per process. @default DEFAULT_INDEX_CACHE_BYTES (256 MiB) */
  indexCacheBytes?: number;
}

/**
 * What the description of a local knowledge base without an embedding model ends with, as the
 * APIs show it: its search is by words only. Not stored; an update that sends it back drops it.
 */
export const FULL_TEXT_ONLY_NOTE = '(full-text search only: no embedding model)';

const BACKEND_NAMES = { ragflow: 'RAGFlow', bedrock: 'Amazon Bedrock' } as const;

export function createKnowledge(deps: KnowledgeDeps): KnowledgeAdmin {
  const { store } = deps;
  const now = deps.now ?? Date.now;
  const iso = () => new Date(now()).toISOString();
  const local = new LocalBackend({ store: { ...store, now }, llm: deps.llm, now, cache: new IndexCache(deps.indexCacheBytes ?? DEFAULT_INDEX_CACHE_BYTES) });

  /** Refuses an embedding model this deployment cannot call, naming the field. */
  const checkEmbedding = (spec: string, field: string) => {
    try {
      local.embedder(spec);
    } catch (error) {
      if (error instanceof EaselError && error.code === 'invalid_config') {
        throw new EaselError('invalid_request', `${field}: ${error.message.replace(/^embedding_model: /, '')}`);
      }
      throw error;
    }
  };

  /** The local knowledge base; a remote one's documents are not ours to manage. */
  const getLocal = async (tenant: string, kbId: string): Promise<LocalKb> => {
    const { kb } = await getKnowledgeBase(store, tenant, kbId);
    if (kb.backend !== 'local') {
      throw new EaselError('invalid_request', `knowledge base "${kb.name}" is on ${BACKEND_NAMES[kb.backend]}: its documents are managed there, not here`);
    }
    return kb;
  };

  const admin: KnowledgeAdmin = {
    async create(tenant, input: NewKnowledgeBase) {
      const valid = parseNewKnowledgeBase(input);
      const at = iso();
      const common = {
        id: randomBytes(16).toString('hex'),
        tenant,
        name: valid.name,
        description: stripNote(valid.description ?? ''),
        aliases: valid.aliases ?? [],
        document_count: 0,
        chunk_count: 0,
        token_count: 0,
        created_at: at,
        updated_at: at,
      };
      let kb: KnowledgeBase;
      if (valid.backend === 'local') {
        const model = valid.local?.embedding_model;
        if (model) checkEmbedding(model, 'local.embedding_model');
        kb = { ...common, backend: 'local', local: { chunking: withChunkingDefaults(valid.local?.chunking), ...(model ? { embedding_model: model } : {}) } };
      } else if (valid.backend === 'ragflow') {
        // a migrated template names the RAGFlow datasets themselves: by default they are its aliases
        const aliases = valid.aliases ?? [...new Set(valid.ragflow.dataset_ids)];
        kb = { ...common, aliases, backend: 'ragflow', ragflow: { ...valid.ragflow, api_key: valid.ragflow.api_key.trim() } };
      } else {
        kb = { ...common, backend: 'bedrock', bedrock: valid.bedrock };
      }
      await createKnowledgeBase(store, kb);
      return view(kb);
    },

    async list(tenant, options) {
      const all = (await listKnowledgeBases(store, tenant)).map((s) => s.kb);
      const filtered = all.filter((kb) => (options.id === undefined || kb.id === options.id) && (options.name === undefined || nameKey(kb.name) === nameKey(options.name)));
      return paged(filtered.map(view), options);
    },

    async get(tenant, id) {
      return view((await getKnowledgeBase(store, tenant, id)).kb);
    },

    async update(tenant, id, patch: KnowledgeBasePatch) {
      const valid = parsePatch(patch);
      for (let attempt = 0; ; attempt++) {
        const { kb } = await getKnowledgeBase(store, tenant, id);
        const change: KnowledgeBaseChange = {};
        if (valid.name !== undefined) change.name = valid.name;
        if (valid.description !== undefined) change.description = stripNote(valid.description);
        if (valid.aliases !== undefined) change.aliases = valid.aliases;
        if (valid.chunking !== undefined || valid.embedding_model !== undefined) {
          if (kb.backend !== 'local') {
            throw new EaselError('invalid_request', `${valid.chunking !== undefined ? 'chunking' : 'embedding_model'}: only local knowledge bases are chunked and embedded here`);
          }
          const settings = { ...kb.local, chunking: withChunkingDefaults(valid.chunking, kb.local.chunking) };
          if (valid.embedding_model !== undefined && valid.embedding_model !== (kb.local.embedding_model ?? null)) {
            // as RAGFlow: chunks embedded by one model cannot be searched with another's vectors
            if (kb.chunk_count > 0) throw new EaselError('invalid_request', 'embedding_model: cannot be changed while the knowledge base has chunks; delete its documents first');
            if (valid.embedding_model === null) delete settings.embedding_model;
            else {
              checkEmbedding(valid.embedding_model, 'embedding_model');
              settings.embedding_model = valid.embedding_model;
            }
          }
          change.settings = { ...settings };
        }
        try {
          await updateKnowledgeBase(store, kb, change, iso());
          return view((await getKnowledgeBase(store, tenant, id)).kb);
        } catch (error) {
          if (!(error instanceof KnowledgeBaseChangedError) || attempt >= 3) throw error;
        }
      }
    },

    async delete(tenant, id) {
      await deleteKnowledgeBase(store, tenant, id);
    },

    async upload(tenant, kbId, doc) {
      return local.upload(tenant, await getLocal(tenant, kbId), doc);
    },

    async listDocuments(tenant, kbId, options) {
      await getKnowledgeBase(store, tenant, kbId);
      const keywords = options.keywords?.trim().toLowerCase();
      const docs = (await listDocuments(store, tenant, kbId))
        .map((d) => d.doc)
        .filter((d) => (options.id === undefined || d.id === options.id)
          && (options.name === undefined || d.name === options.name)
          && (!keywords || d.name.toLowerCase().includes(keywords)));
      return paged(docs, options);
    },

    async getDocument(tenant, kbId, docId) {
      await getKnowledgeBase(store, tenant, kbId);
      return (await getDocument(store, tenant, kbId, docId)).doc;
    },

    async deleteDocuments(tenant, kbId, docIds) {
      await getLocal(tenant, kbId);
      if (docIds.length === 0) return;
      await deleteDocuments(store, tenant, kbId, docIds, iso());
      await local.rebuildIndex(tenant, kbId);
    },

    async parse(tenant, kbId, docIds) {
      const kb = await getLocal(tenant, kbId);
      const ids = [...new Set(docIds)];
      if (ids.length > MAX_DOCUMENTS_PER_PARSE) {
        throw new EaselError('invalid_request', `document_ids: at most ${MAX_DOCUMENTS_PER_PARSE} documents a request (they are parsed within it)`);
      }
      const docs = await Promise.all(ids.map((id) => getDocument(store, tenant, kbId, id)));
      // bounded by the parsers' own caps and each embedding call's timeout, not by a deadline here
      return local.parse(tenant, kb, docs, new AbortController().signal);
    },

    async listChunks(tenant, kbId, docId, options) {
      await getKnowledgeBase(store, tenant, kbId);
      const stored = await getDocument(store, tenant, kbId, docId);
      const keywords = options.keywords?.trim().toLowerCase();
      const chunks = (await listDocumentChunks(store, tenant, stored))
        .filter((c) => (options.id === undefined || c.id === options.id) && (!keywords || c.content.toLowerCase().includes(keywords)))
        .map((c) => chunkView(c, kbId));
      const size = Math.max(1, options.page_size);
      const page = Math.max(1, options.page);
      return { items: chunks.slice((page - 1) * size, page * size), total: chunks.length };
    },

    forTenant(tenant) {
      return runKnowledge(tenant);
    },
  };

  /** The embedder of a knowledge base's model; one the configuration no longer serves fails the run's step. */
  const embedderFor = (model: string) => {
    try {
      return local.embedder(model);
    } catch (error) {
      if (error instanceof EaselError && error.code === 'invalid_config') throw new ComponentError(error.message, { cause: error });
      throw error;
    }
  };

  const runKnowledge = (tenant: string): RunKnowledge => ({
    async resolve(idsOrNames) {
      const { found, missing } = await resolveKnowledgeBases(store, tenant, idsOrNames);
      return { found: found.map((s) => view(s.kb)), missing };
    },

    async retrieve(kbs, query, signal) {
      // another tenant's knowledge base is as missing as one that never was
      const foreign = kbs.find((kb) => kb.tenant !== tenant);
      if (foreign) throw new ComponentError(`knowledge base ${foreign.id} not found`);
      if (kbs.length === 0) return { chunks: [], doc_aggs: [], total: 0 };
      const page = Math.max(1, Math.floor(query.page ?? 1));
      // each knowledge base answers the first `page * top_n`; the page is cut from them merged
      const wide: RetrievalQuery = { ...query, page: 1, top_n: page * Math.max(0, Math.floor(query.top_n)) };
      const locals = kbs.filter((kb): kb is LocalKb => kb.backend === 'local');
      const models = [...new Set(locals.map((kb) => kb.local.embedding_model).filter((m): m is string => m !== undefined))];
      if (models.length > 1) throw new ComponentError('Knowledge bases use different embedding models.');
      const model = models[0];
      const queryVector = model && query.question.trim() !== '' ? (await embedderFor(model).embed([query.question], signal))[0] : undefined;
      const results = await Promise.all(kbs.map(async (kb): Promise<RetrievalResult> => {
        if (kb.backend === 'local') {
          return local.search(tenant, kb, wide, kb.local.embedding_model ? queryVector : undefined).catch((error: unknown) => {
            if (error instanceof NotFoundError) throw new ComponentError(`knowledge base "${kb.name}" was deleted`);
            throw error;
          });
        }
        const remote = deps.remote?.[kb.backend];
        if (!remote) throw new ComponentError(`knowledge base "${kb.name}" is on ${BACKEND_NAMES[kb.backend]}, and this deployment has no ${BACKEND_NAMES[kb.backend]} client`);
        return remote(kb, wide, { signal, secret: deps.secretsFor(tenant), guard: deps.guard });
      }));
      return merged(results, page, Math.max(0, Math.floor(query.top_n)));
    },
  });

  return admin;
}

type LocalKb = Extract<KnowledgeBase, { backend: 'local' }>;

/** The knowledge base as the APIs show it. */
function view(kb: KnowledgeBase): KnowledgeBase {
  if (kb.backend !== 'local' || kb.local.embedding_model) return kb;
  return { ...kb, description: kb.description ? `${kb.description} ${FULL_TEXT_ONLY_NOTE}` : FULL_TEXT_ONLY_NOTE };
}

function stripNote(description: string): string {
  const trimmed = description.trimEnd();
  return trimmed.endsWith(FULL_TEXT_ONLY_NOTE) ? trimmed.slice(0, -FULL_TEXT_ONLY_NOTE.length).trimEnd() : description;
}

function paged<T extends { created_at: string; updated_at: string }>(items: T[], options: ListOptions): Page<T> {
  const key = options.orderby === 'update_time' ? 'updated_at' : 'created_at';
  const sorted = [...items].sort((a, b) => (options.desc ? b[key].localeCompare(a[key]) : a[key].localeCompare(b[key])));
  const size = Math.max(1, options.page_size);
  const page = Math.max(1, options.page);
  return { items: sorted.slice((page - 1) * size, page * size), total: sorted.length };
}

function chunkView(c: StoredChunk, kbId: string): ChunkView {
  return {
    id: c.id,
    content: c.content,
    document_id: c.doc_id,
    kb_id: kbId,
    index: c.index,
    token_count: c.token_count,
    important_keywords: c.important_kwd,
    available: c.available,
  };
}

/** Several knowledge bases' answers as one: best first, one page of `perPage`, counts summed. */
function merged(results: readonly RetrievalResult[], page: number, perPage: number): RetrievalResult {
  const chunks = results.flatMap((r) => r.chunks).sort((a, b) => b.similarity - a.similarity);
  const aggs = new Map<string, DocAgg>();
  for (const agg of results.flatMap((r) => r.doc_aggs)) {
    const seen = aggs.get(agg.doc_id);
    if (seen) seen.count += agg.count;
    else aggs.set(agg.doc_id, { ...agg });
  }
  return {
    chunks: chunks.slice((page - 1) * perPage, page * perPage),
    doc_aggs: [...aggs.values()].sort((a, b) => b.count - a.count),
    total: results.reduce((n, r) => n + r.total, 0),
  };
}
