/**
 * Request and response schemas of `/workflows/v1/knowledge-bases` (zod 4, also the OpenAPI
 * document), and the views that turn the knowledge service's shapes into answers.
 */
import { z } from '@hono/zod-openapi';
import { MAX_ALIASES, MAX_CHUNK_TOKENS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS } from '../../knowledge/validation';
import { BACKEND_KINDS, type ChunkingSettings, type ChunkView, type KnowledgeBase, type KnowledgeDocument, type NewKnowledgeBase } from '../../knowledge/types';

export const KB_ID = z.string().regex(/^[0-9a-f]{32}$/, '32 lowercase hex characters').openapi({ example: '3b4de7d4241d11f0a6a79f24fc270c7f' });
export const KbParam = z.object({ id: KB_ID });
export const DocParam = z.object({ id: KB_ID, doc: KB_ID });

const Name = z.string().trim().min(1, 'must not be empty').max(MAX_NAME_CHARS, `at most ${MAX_NAME_CHARS} characters`);
const MAX_DESCRIPTION = MAX_DESCRIPTION_CHARS;
const Aliases = z.array(z.string().trim().min(1).max(MAX_NAME_CHARS)).max(MAX_ALIASES).openapi({ description: 'Other ids or names a DSL may use for it (the RAGFlow dataset ids a migrated template carries)' });

export const Chunking = z
  .strictObject({
    chunk_token_num: z.number().int().min(1).max(MAX_CHUNK_TOKENS).optional().openapi({ description: 'Tokens per chunk (default 512)' }),
    delimiter: z.string().min(1).max(256).optional().openapi({ description: 'Characters that end a piece; a multi-character delimiter in backticks (default "\\n")' }),
    overlapped_percent: z.number().int().min(0).max(90).optional().openapi({ description: 'Percent of a chunk repeated at the start of the next (default 0)' }),
  })
  .openapi('Chunking', { description: "RAGFlow's naive chunker settings" });

const EmbeddingModel = z.string().trim().min(1).max(255).openapi({ description: 'A model of the model configuration that embeds, e.g. `openai:text-embedding-3-small`; absent: full-text search only' });

const LocalSettings = z.strictObject({ chunking: Chunking.optional(), embedding_model: EmbeddingModel.optional() });
const RagflowSettings = z.strictObject({
  base_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048),
  api_key: z.string().regex(/^\{secret\.[A-Za-z_][A-Za-z0-9_]{0,63}\}$/, 'a tenant secret reference, `{secret.NAME}`: the key itself is never stored'),
  dataset_ids: z.array(z.string().min(1).max(64)).min(1).max(100),
});
const BedrockSettings = z.strictObject({
  knowledge_base_id: z.string().regex(/^[0-9A-Z]{10}$/, '10 upper-case letters or digits'),
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS region, e.g. us-east-1').optional(),
  filter: z.record(z.string(), z.unknown()).optional().openapi({ description: 'A Bedrock RetrievalFilter, passed as it is' }),
});

export const CreateKnowledgeBase = z
  .object({
    name: Name,
    description: z.string().max(MAX_DESCRIPTION).optional(),
    aliases: Aliases.optional(),
    backend: z.enum(BACKEND_KINDS).default('local'),
    local: LocalSettings.optional(),
    ragflow: RagflowSettings.optional(),
    bedrock: BedrockSettings.optional(),
  })
  .superRefine((body, ctx) => {
    for (const kind of BACKEND_KINDS) {
      const given = body[kind] !== undefined;
      if (kind === body.backend && kind !== 'local' && !given) ctx.addIssue({ code: 'custom', path: [kind], message: `required when backend is "${kind}"` });
      if (kind !== body.backend && given) ctx.addIssue({ code: 'custom', path: [kind], message: `only for backend "${kind}" (this one is "${body.backend}")` });
    }
  })
  .openapi('CreateKnowledgeBase', { description: '`backend` (default `local`) and its settings under the key of the same name' });

export const UpdateKnowledgeBase = z
  .strictObject({
    name: Name.optional(),
    description: z.string().max(MAX_DESCRIPTION).optional(),
    aliases: Aliases.optional(),
    chunking: Chunking.optional().openapi({ description: '`local` only; documents parsed from now on use it' }),
    embedding_model: EmbeddingModel.nullable().optional().openapi({ description: '`local` only; null: full-text search only' }),
  })
  .openapi('UpdateKnowledgeBase');

export const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(512).optional(),
});

export const UploadQuery = z.object({
  parse: z.enum(['true', 'false']).default('true').openapi({ description: 'false: store the documents (UNSTART) and parse them later with POST .../documents/parse' }),
});

export const ParseBody = z.strictObject({ document_ids: z.array(KB_ID).min(1).max(100) }).openapi('ParseDocuments');

export const SearchBody = z
  .strictObject({
    question: z.string().trim().min(1, 'must not be empty').max(10_000),
    top_n: z.number().int().min(1).max(100).default(8).openapi({ description: 'Chunks to answer' }),
    top_k: z.number().int().min(1).max(4096).default(1024).openapi({ description: 'Candidates the first stage considers' }),
    similarity_threshold: z.number().min(0).max(1).default(0.2),
    keywords_similarity_weight: z.number().min(0).max(1).default(0.5).openapi({ description: 'Weight of the full-text score; the vector score weighs 1 minus it' }),
    document_ids: z.array(KB_ID).max(100).optional(),
    highlight: z.boolean().optional(),
    page: z.number().int().min(1).max(1000).optional(),
  })
  .openapi('SearchKnowledgeBase');

export const KnowledgeBaseSchema = z
  .looseObject({ id: z.string(), name: z.string(), backend: z.enum(BACKEND_KINDS), document_count: z.number().int(), chunk_count: z.number().int(), token_count: z.number().int(), created_at: z.string(), updated_at: z.string() })
  .openapi('KnowledgeBase');
export const DocumentSchema = z
  .looseObject({ id: z.string(), name: z.string(), status: z.enum(['UNSTART', 'RUNNING', 'CANCEL', 'DONE', 'FAIL']), progress: z.number(), progress_msg: z.string(), chunk_count: z.number().int() })
  .openapi('KnowledgeDocument');
export const ChunkSchema = z.looseObject({ id: z.string(), content: z.string(), document_id: z.string(), index: z.number().int() }).openapi('KnowledgeChunk');
export const SearchResultSchema = z
  .object({ chunks: z.array(z.looseObject({ chunk_id: z.string(), content_with_weight: z.string(), similarity: z.number() })), doc_aggs: z.array(z.looseObject({ doc_id: z.string(), count: z.number() })), total: z.number().int() })
  .openapi('SearchResult');

/** The create body as the service takes it. */
export function newKnowledgeBase(body: z.infer<typeof CreateKnowledgeBase>): NewKnowledgeBase {
  const common = { name: body.name, ...(body.description !== undefined ? { description: body.description } : {}), ...(body.aliases ? { aliases: body.aliases } : {}) };
  if (body.backend === 'ragflow') return { ...common, backend: 'ragflow', ragflow: body.ragflow as NonNullable<typeof body.ragflow> };
  if (body.backend === 'bedrock') {
    const b = body.bedrock as NonNullable<typeof body.bedrock>;
    return { ...common, backend: 'bedrock', bedrock: { knowledge_base_id: b.knowledge_base_id, ...(b.region ? { region: b.region } : {}), ...(b.filter ? { filter: b.filter } : {}) } };
  }
  const local = body.local;
  // NewKnowledgeBase's `local` intersects Partial<LocalSettings> (whole chunking) with a partial
  // chunking; the service takes a partial one and fills the rest from DEFAULT_CHUNKING
  const chunking = local?.chunking ? (chunkingOf(local.chunking) as ChunkingSettings) : undefined;
  return { ...common, backend: 'local', local: { ...(chunking ? { chunking } : {}), ...(local?.embedding_model ? { embedding_model: local.embedding_model } : {}) } };
}

/** The chunking settings sent, without the keys left out. */
export function chunkingOf(sent: z.infer<typeof Chunking>): Partial<ChunkingSettings> {
  return {
    ...(sent.chunk_token_num !== undefined ? { chunk_token_num: sent.chunk_token_num } : {}),
    ...(sent.delimiter !== undefined ? { delimiter: sent.delimiter } : {}),
    ...(sent.overlapped_percent !== undefined ? { overlapped_percent: sent.overlapped_percent } : {}),
  };
}

export function knowledgeBaseView(kb: KnowledgeBase) {
  const settings = kb.backend === 'local' ? { local: kb.local } : kb.backend === 'ragflow' ? { ragflow: kb.ragflow } : { bedrock: kb.bedrock };
  return {
    id: kb.id,
    name: kb.name,
    description: kb.description,
    aliases: kb.aliases,
    backend: kb.backend,
    ...settings,
    document_count: kb.document_count,
    chunk_count: kb.chunk_count,
    token_count: kb.token_count,
    created_at: kb.created_at,
    updated_at: kb.updated_at,
  };
}

export function documentView(d: KnowledgeDocument) {
  return {
    id: d.id,
    knowledge_base_id: d.kb_id,
    name: d.name,
    size: d.size,
    mime_type: d.mime_type,
    sha256: d.sha256,
    status: d.status,
    progress: d.progress,
    progress_msg: d.progress_msg,
    chunk_count: d.chunk_count,
    token_count: d.token_count,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

export function chunkView(c: ChunkView) {
  return {
    id: c.id,
    content: c.content,
    document_id: c.document_id,
    knowledge_base_id: c.kb_id,
    index: c.index,
    token_count: c.token_count,
    important_keywords: c.important_keywords,
    available: c.available,
  };
}
