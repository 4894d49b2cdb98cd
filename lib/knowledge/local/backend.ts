/**
 * The `local` backend: documents uploaded into the store, parsed and chunked in the request that
 * asks for it, embedded when the knowledge base has an embedding model, their chunks stored as
 * items, then one index rebuilt from every chunk of the knowledge base and pointed at.
 *
 *   upload -> parse (lib/knowledge/parse) -> chunk (naive) -> embed? -> chunk items
 *          -> rebuild the index (search.ts) -> index blob + pointer (lib/store/knowledge-index)
 *
 * Searching loads the pointed-at index through the process's cache. A pointer whose blob is gone
 * (replaced meanwhile, or a rebuild that raced) and an index left behind by a parse that died
 * before rebuilding are repaired by rebuilding from the chunks, which are the source of truth.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ComponentError } from '../../canvas/errors';
import { EaselError } from '../../errors';
import { LlmError, LlmTransientError } from '../../llm/errors';
import type { LlmSettings } from '../../llm/models';
import type { StoreContext } from '../../store/dynamo';
import { NotFoundError, StoreUnavailableError } from '../../store/errors';
import { getKnowledgeBase, type StoredKnowledgeBase } from '../../store/knowledge';
import {
  finishParse,
  getDocument,
  KnowledgeLimitError,
  type ParseOutcome,
  ParseSupersededError,
  putDocument,
  readDocumentBytes,
  readKnowledgeChunks,
  startParse,
  type StoredChunk,
  type StoredDocument,
  writeChunks,
} from '../../store/knowledge-documents';
import { dropIndex, readIndex, swapIndex } from '../../store/knowledge-index';
import { MAX_CHUNKS_PER_KB, MAX_DOCUMENT_BYTES, MAX_DOCUMENTS_PER_KB } from '../limits';
import { DocumentParseError } from '../parse/errors';
import type { KnowledgeBase, KnowledgeDocument, NewDocument, RetrievalQuery, RetrievalResult } from '../types';
import { createEmbedder, type Embedder } from './embeddings';
import { estimateIndexBytes, type IndexCache } from './index-cache';
import type { IndexedChunk, LocalIndex } from './search';

// The parsers (htmlparser2, PDF.js, the tokenizer) and the index (MiniSearch) load on first use:
// a turn that retrieves nothing never evaluates them, and one that only retrieves never parses.
let parsing: Promise<{ parse: typeof import('../parse'); chunk: typeof import('../chunk') }> | undefined;
const loadParsing = () => (parsing ??= Promise.all([import('../parse'), import('../chunk')]).then(([parse, chunk]) => ({ parse, chunk })));
let searching: Promise<typeof import('./search')> | undefined;
const loadSearch = () => (searching ??= import('./search'));

type LocalKnowledgeBase = Extract<KnowledgeBase, { backend: 'local' }>;

export interface LocalBackendOptions {
  store: StoreContext;
  llm: LlmSettings;
  now: () => number;
  cache: IndexCache;
}

/** Rebuilds that lose to a later change try again on top of it this many times. */
const REBUILD_ATTEMPTS = 5;
/**
 * An index this much older than its knowledge base's last chunk change is taken for one a dead
 * parse left behind, and rebuilt by the next search (a live parse rebuilds within its request).
 */
export const STALE_INDEX_REPAIR_MS = 15 * 60_000;
/** Texts embedded per call of the embedder (it batches requests within). */
const EMBED_BATCH = 256;

const MIME_BY_KIND = { text: 'text/plain', markdown: 'text/markdown', html: 'text/html', pdf: 'application/pdf' } as const;
const GENERIC_MIME = new Set(['', 'application/octet-stream', 'binary/octet-stream', 'application/x-unknown']);

export class LocalBackend {
  readonly #store: StoreContext;
  readonly #llm: LlmSettings;
  readonly #now: () => number;
  readonly #cache: IndexCache;
  readonly #embedders = new Map<string, Embedder>();

  constructor(options: LocalBackendOptions) {
    this.#store = options.store;
    this.#llm = options.llm;
    this.#now = options.now;
    this.#cache = options.cache;
  }

  /** The embedder of a model spec; EaselError('invalid_config') when it cannot embed here. */
  embedder(spec: string): Embedder {
    let embedder = this.#embedders.get(spec);
    if (!embedder) {
      embedder = createEmbedder(spec, this.#llm);
      this.#embedders.set(spec, embedder);
    }
    return embedder;
  }

  async upload(tenant: string, kb: LocalKnowledgeBase, input: NewDocument): Promise<KnowledgeDocument> {
    if (input.bytes.byteLength > MAX_DOCUMENT_BYTES) {
      throw new EaselError('payload_too_large', `file: ${input.name} is ${input.bytes.byteLength} bytes; a document may have at most ${MAX_DOCUMENT_BYTES} (${MAX_DOCUMENT_BYTES / 1024 / 1024} MiB)`);
    }
    const { parse } = await loadParsing();
    const kind = parse.documentKind(input.name, input.mime_type);
    if (!kind) {
      const ext = /\.[^./\\]+$/.exec(input.name)?.[0]?.toLowerCase();
      throw new EaselError('invalid_request', `unsupported document type ${ext ? `"${ext}"` : `(${input.mime_type || 'no extension'})`}; supported: ${parse.SUPPORTED_EXTENSIONS.join(', ')}`);
    }
    const at = this.#iso();
    const mime = input.mime_type.split(';')[0]?.trim().toLowerCase() ?? '';
    const doc: KnowledgeDocument = {
      id: randomBytes(16).toString('hex'),
      kb_id: kb.id,
      name: input.name,
      size: input.bytes.byteLength,
      mime_type: GENERIC_MIME.has(mime) ? MIME_BY_KIND[kind] : mime,
      sha256: createHash('sha256').update(input.bytes).digest('hex'),
      status: 'UNSTART',
      progress: 0,
      progress_msg: '',
      chunk_count: 0,
      token_count: 0,
      created_at: at,
      updated_at: at,
    };
    await putDocument(this.#store, tenant, doc, input.bytes, MAX_DOCUMENTS_PER_KB);
    return doc;
  }

  /**
   * Parses the documents one after another, each ending DONE or FAIL (a failure stops none of
   * the others), then rebuilds the index once. Answers the documents as they ended (one deleted
   * meanwhile is left out).
   */
  async parse(tenant: string, kb: LocalKnowledgeBase, docs: readonly StoredDocument[], signal: AbortSignal): Promise<KnowledgeDocument[]> {
    const out: KnowledgeDocument[] = [];
    for (const stored of docs) {
      const parsed = await this.#parseOne(tenant, kb, stored, signal);
      if (parsed) out.push(parsed);
    }
    await this.rebuildIndex(tenant, kb.id);
    return out;
  }

  /** One document, DONE or FAIL; undefined when it was deleted meanwhile. */
  async #parseOne(tenant: string, kb: LocalKnowledgeBase, stored: StoredDocument, signal: AbortSignal): Promise<KnowledgeDocument | undefined> {
    const run = randomBytes(8).toString('hex');
    let started: StoredDocument;
    try {
      started = await startParse(this.#store, tenant, kb.id, stored.doc.id, run, this.#iso());
    } catch (error) {
      if (error instanceof NotFoundError) return undefined;
      throw error;
    }
    let outcome: ParseOutcome;
    try {
      outcome = await this.#chunkAndStore(tenant, kb, started, run, signal);
    } catch (error) {
      outcome = { status: 'FAIL', message: failureReason(error) };
    }
    try {
      return (await finishParse(this.#store, tenant, started, run, outcome, { at: this.#iso(), maxChunks: MAX_CHUNKS_PER_KB })).doc;
    } catch (error) {
      if (error instanceof KnowledgeLimitError) {
        return (await finishParse(this.#store, tenant, started, run, { status: 'FAIL', message: error.message }, { at: this.#iso(), maxChunks: MAX_CHUNKS_PER_KB })).doc;
      }
      // a later parse of the same document has it now: answer it as that one left it
      if (error instanceof ParseSupersededError) {
        return (await getDocument(this.#store, tenant, kb.id, stored.doc.id).catch((e: unknown) => {
          if (e instanceof NotFoundError) return undefined;
          throw e;
        }))?.doc;
      }
      throw error;
    }
  }

  /** Parses, chunks, embeds and writes the run's chunks; throws what makes the document FAIL. */
  async #chunkAndStore(tenant: string, kb: LocalKnowledgeBase, doc: StoredDocument, run: string, signal: AbortSignal): Promise<ParseOutcome> {
    const { parse, chunk } = await loadParsing();
    const kind = parse.documentKind(doc.doc.name, doc.doc.mime_type);
    if (!kind) throw new DocumentParseError(`unsupported document type: ${doc.doc.name}`);
    const bytes = await readDocumentBytes(this.#store, tenant, doc);
    const parsed = await parse.parseDocument(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), kind, { signal });
    const pieces = chunk.naiveChunk(parsed, kb.local.chunking);
    if (pieces.length === 0) return { status: 'DONE', chunk_count: 0, token_count: 0, message: 'no text to index in the document' };
    const others = kb.chunk_count - doc.doc.chunk_count;
    if (others + pieces.length > MAX_CHUNKS_PER_KB) {
      throw new KnowledgeLimitError(`the document makes ${pieces.length} chunks and the knowledge base holds ${others}; a knowledge base may hold at most ${MAX_CHUNKS_PER_KB}`);
    }
    const vectors = kb.local.embedding_model ? await this.#embed(kb.local.embedding_model, pieces.map((p) => p.content), signal) : undefined;
    const chunks: StoredChunk[] = pieces.map((piece, index) => ({
      id: chunkId(doc.doc.id, index, piece.content),
      doc_id: doc.doc.id,
      index,
      content: piece.content,
      token_count: piece.token_count,
      pages: piece.pages ?? [],
      important_kwd: [],
      available: true,
      ...(vectors ? { vector: Float32Array.from(vectors[index] ?? []) } : {}),
    }));
    await writeChunks(this.#store, tenant, kb.id, run, chunks);
    const tokens = chunks.reduce((n, c) => n + c.token_count, 0);
    return { status: 'DONE', chunk_count: chunks.length, token_count: tokens, message: `${chunks.length} chunks, ${tokens} tokens${vectors ? ', embedded' : ''}` };
  }

  async #embed(spec: string, texts: readonly string[], signal: AbortSignal): Promise<number[][]> {
    const embedder = this.embedder(spec);
    const out: number[][] = [];
    for (let i = 0; i < texts.length; i += EMBED_BATCH) out.push(...(await embedder.embed(texts.slice(i, i + EMBED_BATCH), signal)));
    if (out.length !== texts.length) throw new LlmError(`${spec}: ${out.length} vectors for ${texts.length} chunks`);
    return out;
  }

  /**
   * Builds the index from every chunk that counts and points the knowledge base at it; a rebuild
   * that a later change overtook tries again on top of it. Quietly done when the index is
   * current already, unless `repair` says its blob is lost.
   */
  async rebuildIndex(tenant: string, kbId: string, options: { repair?: boolean } = {}): Promise<void> {
    const { buildIndex, serializeIndex } = await loadSearch();
    for (let attempt = 0; attempt < REBUILD_ATTEMPTS; attempt++) {
      const stored = await getKnowledgeBase(this.#store, tenant, kbId);
      const current = stored.index?.version === stored.docsVersion;
      // someone else's rebuild got there while ours lost
      if (attempt > 0 && current) return;
      const { docs, chunks } = await readKnowledgeChunks(this.#store, tenant, kbId);
      const names = new Map(docs.map((d) => [d.doc.id, d.doc.name]));
      const indexed: IndexedChunk[] = chunks
        .filter((c) => c.available)
        .map((c) => ({
          id: c.id,
          doc_id: c.doc_id,
          doc_name: names.get(c.doc_id) ?? '',
          kb_id: kbId,
          content: c.content,
          important_kwd: c.important_kwd,
          pages: c.pages,
          ...(c.vector && c.vector.length > 0 ? { vector: c.vector } : {}),
        }));
      const index = buildIndex(indexed);
      const text = serializeIndex(index);
      const hash = createHash('sha256').update(text).digest('hex');
      if (current && stored.index?.hash === hash && !options.repair) return;
      const pointer = { hash, version: stored.docsVersion, bytes: text.length, chunks: indexed.length, builtAt: this.#iso() };
      if ((await swapIndex(this.#store, tenant, kbId, pointer, text)) === 'swapped') {
        this.#cache.set(hash, index, estimateIndexBytes(text.length));
        return;
      }
      // overtaken: our blob is nobody's unless a later build came to the same text
      const now = await getKnowledgeBase(this.#store, tenant, kbId);
      if (now.index?.hash !== hash) await dropIndex(this.#store, tenant, kbId, hash);
    }
  }

  /** Searches one knowledge base: its current index, `page` 1 of `top_n` results. */
  async search(tenant: string, kb: LocalKnowledgeBase, query: RetrievalQuery, queryVector: readonly number[] | undefined): Promise<RetrievalResult> {
    const index = await this.#currentIndex(tenant, kb.id);
    if (!index || index.size === 0) return { chunks: [], doc_aggs: [], total: 0 };
    const { searchIndex } = await loadSearch();
    try {
      return searchIndex(index, query, queryVector);
    } catch (error) {
      // a question vector of another length than the chunks': the model changed under the index
      if (error instanceof EaselError && error.code === 'invalid_state') {
        throw new ComponentError(`knowledge base "${kb.name}": its index cannot be searched (${error.message}); parse its documents again`);
      }
      throw error;
    }
  }

  async #currentIndex(tenant: string, kbId: string): Promise<LocalIndex | undefined> {
    const { deserializeIndex } = await loadSearch();
    for (let attempt = 0; attempt < 3; attempt++) {
      const stored = await getKnowledgeBase(this.#store, tenant, kbId);
      if (this.#needsRepair(stored)) {
        await this.rebuildIndex(tenant, kbId);
        continue;
      }
      const pointer = stored.index;
      if (!pointer) return undefined;
      const index = await this.#cache.load(pointer.hash, async () => {
        const text = await readIndex(this.#store, tenant, kbId, pointer.hash);
        return text === undefined ? undefined : { index: deserializeIndex(text), bytes: estimateIndexBytes(text.length) };
      });
      if (index) return index;
      // the blob went: replaced since the pointer was read (read it again), or lost (rebuild)
      const again = await getKnowledgeBase(this.#store, tenant, kbId);
      if (again.index?.hash === pointer.hash) await this.rebuildIndex(tenant, kbId, { repair: true });
    }
    throw new EaselError('unavailable', 'the knowledge base index kept changing while it was read; try again');
  }

  #needsRepair(stored: StoredKnowledgeBase): boolean {
    const { index, docsVersion, kb } = stored;
    if (docsVersion === 0) return false;
    if (!index) return kb.chunk_count > 0;
    return index.version < docsVersion && this.#now() - Date.parse(kb.updated_at) > STALE_INDEX_REPAIR_MS;
  }

  #iso(): string {
    return new Date(this.#now()).toISOString();
  }
}

/** A chunk's id: stable for the same text at the same place of the same document. */
function chunkId(docId: string, index: number, content: string): string {
  return createHash('sha256').update(`${docId}\u0000${index}\u0000${content}`).digest('hex').slice(0, 32);
}

/**
 * What a FAIL document says: the parser's, the limit's or the embedding model's reason, or a
 * plain one for anything unexpected. The store's failures are not the document's: they end the
 * request (transient), and the document is parsed again by the next request.
 */
function failureReason(error: unknown): string {
  if (error instanceof StoreUnavailableError) throw error;
  if (error instanceof DocumentParseError || error instanceof KnowledgeLimitError) return error.message;
  if (error instanceof LlmError || error instanceof LlmTransientError) return `embedding failed: ${error.message}`;
  if (error instanceof EaselError && error.code === 'invalid_config') return error.message;
  if (error instanceof Error && error.name === 'AbortError') throw error;
  return 'the document could not be parsed';
}
