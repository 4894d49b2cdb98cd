/**
 * Knowledge bases: what they are, what a run asks of them, and what the APIs manage. The
 * shapes follow RAGFlow's where a client or a DSL can see them (a dataset's `chunk_method` and
 * `parser_config`, a document's `run` status, a retrieved chunk's fields, `doc_aggs`), so the
 * RAGFlow-compatible API and the Retrieval component pass them on as they are.
 *
 * Three backends answer the same `retrieve`:
 * - `local`: the embedded default; documents parsed and chunked here, chunks in DynamoDB items
 *   of the knowledge base, a full-text index (optionally with dense vectors) in
 *   content-addressed blobs, cached per warm process (lib/knowledge/local);
 * - `ragflow`: a RAGFlow server's `POST /api/v1/retrieval` (lib/knowledge/ragflow.ts);
 * - `bedrock`: Amazon Bedrock Knowledge Bases `Retrieve` (lib/knowledge/bedrock.ts).
 *
 * Components reach knowledge only through the run's services (`RunKnowledge`, one per tenant);
 * HTTP only through `KnowledgeAdmin` (also one per tenant). Neither names a backend.
 */

export type BackendKind = 'local' | 'ragflow' | 'bedrock';
export const BACKEND_KINDS = ['local', 'ragflow', 'bedrock'] as const satisfies readonly BackendKind[];

/** RAGFlow's "naive" chunker settings (a dataset's `parser_config`). */
export interface ChunkingSettings {
  /** Token budget per chunk. @default 512 */
  chunk_token_num: number;
  /** Characters that end a piece; a multi-character delimiter is written in backticks, as in RAGFlow. @default "\n" */
  delimiter: string;
  /** Percent of a chunk repeated at the start of the next, 0–90. @default 0 */
  overlapped_percent: number;
}

export const DEFAULT_CHUNKING: ChunkingSettings = { chunk_token_num: 512, delimiter: '\n', overlapped_percent: 0 };

export interface LocalSettings {
  chunking: ChunkingSettings;
  /**
   * A model of the model configuration that embeds (`openai:text-embedding-3-small`,
   * `bedrock:amazon.titan-embed-text-v2:0`); absent: full-text search only.
   */
  embedding_model?: string;
}

export interface RagflowSettings {
  /** The RAGFlow server, e.g. `https://ragflow.example.com` (through the SSRF guard). */
  base_url: string;
  /** `{secret.NAME}`: the tenant secret holding the RAGFlow API key; never the key itself. */
  api_key: string;
  /** The RAGFlow dataset ids this knowledge base searches. */
  dataset_ids: string[];
}

export interface BedrockSettings {
  /** The Bedrock knowledge base's id (10 upper-case letters or digits). */
  knowledge_base_id: string;
  /** @default the deployment's region */
  region?: string;
  /** A Bedrock `RetrievalFilter`, passed as it is. */
  filter?: Record<string, unknown>;
}

interface KnowledgeBaseCommon {
  /** 32 hex digits, as RAGFlow's dataset ids. */
  id: string;
  tenant: string;
  /** Unique in the tenant; DSLs may name a knowledge base by it. */
  name: string;
  description: string;
  /**
   * Other ids a DSL may use for it: the RAGFlow dataset ids a migrated template carries. An id
   * is this knowledge base's only within its tenant.
   */
  aliases: string[];
  document_count: number;
  chunk_count: number;
  token_count: number;
  /** ISO 8601. */
  created_at: string;
  updated_at: string;
}

export type KnowledgeBase =
  | (KnowledgeBaseCommon & { backend: 'local'; local: LocalSettings })
  | (KnowledgeBaseCommon & { backend: 'ragflow'; ragflow: RagflowSettings })
  | (KnowledgeBaseCommon & { backend: 'bedrock'; bedrock: BedrockSettings });

/** RAGFlow's document `run` values. */
export type DocumentStatus = 'UNSTART' | 'RUNNING' | 'CANCEL' | 'DONE' | 'FAIL';

export interface KnowledgeDocument {
  /** 32 hex digits. */
  id: string;
  kb_id: string;
  name: string;
  size: number;
  /** As uploaded, or as the name's extension says. */
  mime_type: string;
  sha256: string;
  status: DocumentStatus;
  /** 0..1 */
  progress: number;
  /** Why parsing failed (`FAIL`), or what it did. */
  progress_msg: string;
  chunk_count: number;
  token_count: number;
  created_at: string;
  updated_at: string;
}

/**
 * One retrieved chunk, in RAGFlow's retriever field names (the Retrieval component's `json`
 * output is a list of these; `chunkReference` turns one into a reference entry).
 */
export interface RetrievedChunk {
  chunk_id: string;
  content_with_weight: string;
  doc_id: string;
  docnm_kwd: string;
  kb_id: string;
  important_kwd: string[];
  image_id: string;
  /** The combined score, 0..1: `(1 - w) * term + w * vector` with w the vector weight. */
  similarity: number;
  vector_similarity: number;
  term_similarity: number;
  positions: number[][];
  doc_type_kwd: string;
  /** The source's URL, when the backend has one (Bedrock's S3 or web location). */
  url?: string;
  /** The content with the matched terms in `<em>`, when asked for. */
  highlight?: string;
}

/** RAGFlow's per-document count of retrieved chunks. */
export interface DocAgg {
  doc_name: string;
  doc_id: string;
  count: number;
}

export interface RetrievalQuery {
  question: string;
  /** How many chunks to return. @default 8 (RAGFlow's Retrieval `top_n`) */
  top_n: number;
  /** How many candidates the first stage considers. @default 1024 */
  top_k: number;
  /** Chunks scoring below this are dropped. @default 0.2 */
  similarity_threshold: number;
  /** Weight of the full-text score against the vector one, 0..1. @default 0.5 (vector weight 0.5) */
  keywords_similarity_weight: number;
  /** Only these documents (RAGFlow's metadata filter resolves to document ids). */
  doc_ids?: string[];
  /** Mark matched terms in `highlight`. */
  highlight?: boolean;
  /** 1-based page of `top_n` results (the retrieval API's `page`). @default 1 */
  page?: number;
}

export interface RetrievalResult {
  chunks: RetrievedChunk[];
  doc_aggs: DocAgg[];
  /** Chunks above the threshold before paging. */
  total: number;
}

/** Why a knowledge base could not answer; `transient` ones fail the turn as `unavailable`. */
export interface RetrievalFailure {
  message: string;
  transient: boolean;
}

/**
 * What a run uses: its tenant's knowledge bases only (a host builds one per tenant), so an id
 * of another tenant's is exactly as missing as one that never was.
 */
export interface RunKnowledge {
  /**
   * The knowledge bases that DSL ids, aliases or names stand for, in the order asked, each
   * once; `missing` lists what named none of this tenant's.
   */
  resolve(idsOrNames: readonly string[]): Promise<{ found: KnowledgeBase[]; missing: string[] }>;
  /** Searches them together; chunks best first. Throws TransientError / ComponentError. */
  retrieve(kbs: readonly KnowledgeBase[], query: RetrievalQuery, signal: AbortSignal): Promise<RetrievalResult>;
}

export interface Page<T> {
  items: T[];
  total: number;
}

export interface ListOptions {
  /** 1-based. */
  page: number;
  page_size: number;
  orderby: 'create_time' | 'update_time';
  desc: boolean;
  id?: string;
  name?: string;
}

export type NewKnowledgeBase =
  | { name: string; description?: string; aliases?: string[]; backend: 'local'; local?: Omit<Partial<LocalSettings>, 'chunking'> & { chunking?: Partial<ChunkingSettings> } }
  | { name: string; description?: string; aliases?: string[]; backend: 'ragflow'; ragflow: RagflowSettings }
  | { name: string; description?: string; aliases?: string[]; backend: 'bedrock'; bedrock: BedrockSettings };

export interface KnowledgeBasePatch {
  name?: string;
  description?: string;
  aliases?: string[];
  chunking?: Partial<ChunkingSettings>;
  embedding_model?: string | null;
}

export interface NewDocument {
  name: string;
  /** As the client sent it; the name's extension decides when it is generic. */
  mime_type: string;
  bytes: Uint8Array;
}

export interface ChunkView {
  id: string;
  content: string;
  document_id: string;
  kb_id: string;
  /** Position in its document, from 0. */
  index: number;
  token_count: number;
  important_keywords: string[];
  available: boolean;
}

/**
 * What the APIs manage, one tenant at a time. Misses (another tenant's ids included) throw the
 * store's NotFoundError('knowledge base' | 'document'); bad input an EaselError naming the field.
 */
export interface KnowledgeAdmin {
  create(tenant: string, input: NewKnowledgeBase): Promise<KnowledgeBase>;
  list(tenant: string, options: ListOptions): Promise<Page<KnowledgeBase>>;
  get(tenant: string, id: string): Promise<KnowledgeBase>;
  update(tenant: string, id: string, patch: KnowledgeBasePatch): Promise<KnowledgeBase>;
  /** Removes its documents, chunks and index blobs too. */
  delete(tenant: string, id: string): Promise<void>;

  /** Stores the document (status `UNSTART`); only `local` knowledge bases take documents. */
  upload(tenant: string, kbId: string, doc: NewDocument): Promise<KnowledgeDocument>;
  listDocuments(tenant: string, kbId: string, options: ListOptions & { keywords?: string }): Promise<Page<KnowledgeDocument>>;
  getDocument(tenant: string, kbId: string, docId: string): Promise<KnowledgeDocument>;
  /** Removes each document with its chunks; the index is rebuilt without them. */
  deleteDocuments(tenant: string, kbId: string, docIds: readonly string[]): Promise<void>;
  /**
   * Parses and chunks the documents, then rebuilds the index. A document that fails to parse
   * ends `FAIL` with its reason and stops none of the others. Answers the documents as they are.
   */
  parse(tenant: string, kbId: string, docIds: readonly string[]): Promise<KnowledgeDocument[]>;
  listChunks(tenant: string, kbId: string, docId: string, options: { page: number; page_size: number; keywords?: string; id?: string }): Promise<Page<ChunkView>>;

  /** The run side of the same tenant. */
  forTenant(tenant: string): RunKnowledge;
}

/** A parsed document: its text, in reading order, split where the source has sections or pages. */
export interface ParsedDocument {
  /** Pieces of text in order (a page of a PDF, a section of Markdown/HTML, the whole of a text file). */
  sections: { text: string; page?: number }[];
}

/** One chunk the chunker made. */
export interface TextChunk {
  content: string;
  token_count: number;
  /** Pages the chunk spans, when the source has pages (RAGFlow's `positions` use them). */
  pages?: number[];
}

/** What a remote backend's client is given for one call: the tenant's secrets and the guard. */
export interface RetrieverDeps {
  signal: AbortSignal;
  /** The tenant's secret values by name (`{secret.NAME}` in a knowledge base's settings). */
  secret: (name: string) => string | undefined | Promise<string | undefined>;
  /** Every URL a tenant supplies goes through it (lib/outbound). */
  guard: import('../outbound/ssrf').SsrfGuard;
}

/**
 * One remote backend's search (lib/knowledge/ragflow.ts, bedrock.ts): failures classified as the
 * model providers classify theirs — TransientError for 408/429/5xx, timeouts and the network;
 * ComponentError for the rest.
 */
export type RemoteRetriever = (kb: KnowledgeBase, query: RetrievalQuery, deps: RetrieverDeps) => Promise<RetrievalResult>;
