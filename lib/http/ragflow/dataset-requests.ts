/**
 * What RAGFlow's dataset routes take (`CreateDatasetReq`, `UpdateDatasetReq`, `DeleteReq`,
 * `ParserConfig` of its validation_utils.py), and what of it Easel keeps: the naive chunker's
 * `chunk_token_num`, `delimiter` and `overlapped_percent`, the description and the embedding
 * model. Whatever asks for a feature Easel does not have (another chunk method, RAPTOR,
 * GraphRAG, auto keywords, an ingestion pipeline, a team permission) is refused in RAGFlow's
 * format, naming the field; settings that only tune RAGFlow's own parsers (`layout_recognize`,
 * `html4excel`, ...) are taken and not kept, so an answer's `parser_config` shows what applies.
 */
import { z } from '@hono/zod-openapi';
import { isRecord } from '../../canvas/references';
import type { ChunkingSettings } from '../../knowledge/types';
import { fieldError } from './arguments';
import { RAGFLOW, RagflowError } from './envelope';

/** RAGFlow's `DATASET_NAME_LIMIT`. */
const NAME_LIMIT = 128;
const TEXT_LIMIT = 65_535;

/** Every chunk method RAGFlow knows, and its refusal of anything else. */
const RAGFLOW_CHUNK_METHODS = ['naive', 'book', 'email', 'laws', 'manual', 'one', 'paper', 'picture', 'presentation', 'qa', 'table', 'tag', 'resume'];
const CHUNK_METHOD_MESSAGE = "Input should be 'naive', 'book', 'email', 'laws', 'manual', 'one', 'paper', 'picture', 'presentation', 'qa', 'table', 'tag' or 'resume'";

/** A feature's settings object: only its switch matters here; the rest tunes what Easel lacks. */
const Switch = (key: string) => z.looseObject({ [key]: z.boolean().optional() });

/** RAGFlow's ParserConfig keys: typed as it types them; unknown keys are refused as it refuses them. */
const ParserConfig = z.strictObject({
  auto_keywords: z.number().int().min(0).max(32).optional(),
  auto_questions: z.number().int().min(0).max(10).optional(),
  chunk_token_num: z.number().int().min(1).max(2048).optional(),
  delimiter: z.string().min(1).optional(),
  overlapped_percent: z.number().int().min(0).max(90).optional(),
  graphrag: Switch('use_graphrag').optional(),
  raptor: Switch('use_raptor').optional(),
  parent_child: Switch('use_parent_child').optional(),
  html4excel: z.boolean().optional(),
  layout_recognize: z.string().optional(),
  enable_children: z.boolean().optional(),
  children_delimiter: z.string().optional(),
  tag_kb_ids: z.array(z.string()).optional(),
  topn_tags: z.number().int().min(1).max(10).optional(),
  filename_embd_weight: z.number().min(0).max(1).nullable().optional(),
  task_page_size: z.number().int().min(1).nullable().optional(),
  pages: z.array(z.array(z.number().int())).nullable().optional(),
  compilation_template_group_id: z.unknown().optional(),
  ext: z.record(z.string(), z.unknown()).optional(),
  table_column_mode: z.enum(['auto', 'manual']).nullable().optional(),
  table_column_roles: z.record(z.string(), z.string()).nullable().optional(),
  table_column_names: z.array(z.string()).nullable().optional(),
});

const datasetFields = {
  avatar: z.string().max(TEXT_LIMIT).nullable().optional(),
  description: z.string().max(TEXT_LIMIT).nullable().optional(),
  embedding_model: z.string().trim().max(255).nullable().optional(),
  permission: z.enum(['me', 'team']).optional(),
  chunk_method: z.unknown().optional(),
  parser_config: z.union([ParserConfig, z.null()]).optional(),
  parse_type: z.number().int().min(0).max(64).nullable().optional(),
  pipeline_id: z.string().nullable().optional(),
  auto_metadata_config: z.unknown().optional(),
  ext: z.record(z.string(), z.unknown()).optional(),
};

export const CreateDatasetReq = z.strictObject({ name: z.string().trim().min(1).max(NAME_LIMIT), ...datasetFields });

export const UpdateDatasetReq = z.strictObject({
  name: z.string().trim().min(1).max(NAME_LIMIT).optional(),
  ...datasetFields,
  pagerank: z.number().int().min(0).max(100).optional(),
  language: z.string().max(32).nullable().optional(),
  connectors: z.array(z.record(z.string(), z.unknown())).optional(),
});

/** `{ids, delete_all}` of the delete routes: ids in any UUID format, without duplicates. */
export const DeleteReq = z.strictObject({ ids: z.array(z.string()).nullable().optional(), delete_all: z.boolean().optional() });

type DatasetFields = { [K in keyof typeof datasetFields]?: z.infer<(typeof datasetFields)[K]> };

/** What of a create or update Easel keeps, after refusing what it cannot do. */
export interface DatasetSettings {
  description?: string;
  /** Absent or empty: unchanged (RAGFlow keeps the dataset's model). */
  embedding_model?: string;
  chunking?: Partial<ChunkingSettings>;
}

export function datasetSettings(req: DatasetFields & { pagerank?: number | undefined; connectors?: unknown[] | undefined }): DatasetSettings {
  checkChunkMethod(req.chunk_method);
  if (req.permission === 'team') throw fieldError('permission', "Easel keeps datasets per tenant (every admin key of it reaches them): only 'me' is taken", 'team');
  if (req.parse_type != null || (req.pipeline_id != null && req.pipeline_id !== '')) {
    throw new RagflowError(RAGFLOW.argument, 'Ingestion pipelines (parse_type, pipeline_id) are not supported by Easel: it parses with the built-in naive chunker.');
  }
  if (req.auto_metadata_config != null) throw fieldError('auto_metadata_config', 'Automatic metadata is not supported by Easel', req.auto_metadata_config);
  if (req.pagerank !== undefined && req.pagerank !== 0) throw new RagflowError(RAGFLOW.data, "'pagerank' can only be set when doc_engine is elasticsearch");
  if (req.connectors !== undefined && req.connectors.length > 0) throw fieldError('connectors', 'Data source connectors are not supported by Easel', req.connectors);
  if (req.ext && Object.keys(req.ext).length > 0) throw fieldError('ext', 'Easel takes no extension fields', req.ext);
  const chunking = req.parser_config ? chunkingOf(req.parser_config) : undefined;
  return {
    ...(req.description != null ? { description: req.description } : {}),
    ...(req.embedding_model ? { embedding_model: req.embedding_model } : {}),
    ...(chunking && Object.keys(chunking).length > 0 ? { chunking } : {}),
  };
}

function checkChunkMethod(method: unknown): void {
  if (method === undefined || method === 'naive') return;
  if (typeof method !== 'string' || !RAGFLOW_CHUNK_METHODS.includes(method)) throw fieldError('chunk_method', CHUNK_METHOD_MESSAGE, method);
  throw fieldError('chunk_method', `Easel chunks with 'naive' only: '${method}' is not supported`, method);
}

/** The naive chunker's settings; a feature switched on that Easel lacks is refused by name. */
function chunkingOf(config: z.infer<typeof ParserConfig>): Partial<ChunkingSettings> {
  const refuse = (field: string, what: string, value: unknown) => {
    throw fieldError(`parser_config.${field}`, `${what} is not supported by Easel`, value);
  };
  if ((config.auto_keywords ?? 0) > 0) refuse('auto_keywords', 'Keyword extraction by a model', config.auto_keywords);
  if ((config.auto_questions ?? 0) > 0) refuse('auto_questions', 'Question generation by a model', config.auto_questions);
  if (config.raptor?.use_raptor) refuse('raptor.use_raptor', 'RAPTOR', true);
  if (config.graphrag?.use_graphrag) refuse('graphrag.use_graphrag', 'GraphRAG', true);
  if (config.parent_child?.use_parent_child || config.enable_children) refuse('parent_child.use_parent_child', 'Parent-child chunking', true);
  if ((config.tag_kb_ids?.length ?? 0) > 0) refuse('tag_kb_ids', 'Tag sets', config.tag_kb_ids);
  if (config.table_column_mode === 'manual' || (isRecord(config.table_column_roles) && Object.keys(config.table_column_roles).length > 0)) refuse('table_column_roles', 'Table column roles', config.table_column_roles);
  if (config.pages != null && config.pages.length > 0) refuse('pages', 'Page ranges', config.pages);
  return {
    ...(config.chunk_token_num !== undefined ? { chunk_token_num: config.chunk_token_num } : {}),
    ...(config.delimiter !== undefined ? { delimiter: config.delimiter } : {}),
    ...(config.overlapped_percent !== undefined ? { overlapped_percent: config.overlapped_percent } : {}),
  };
}

/** RAGFlow's `validate_uuid1_hex`: any UUID form, as 32 lowercase hex digits; else undefined. */
export function uuidHex(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const hex = value.replace(/^urn:uuid:/i, '').replace(/^\{(.*)\}$/, '$1').replaceAll('-', '').toLowerCase();
  return /^[0-9a-f]{32}$/.test(hex) && value.length <= 45 ? hex : undefined;
}

/** The ids of a delete body, normalized; refused as RAGFlow refuses a bad or repeated one. */
export function deleteIds(ids: readonly string[] | null | undefined, field = 'ids', asUuids = true): string[] | undefined {
  if (ids == null) return undefined;
  const normalized = ids.map((id) => {
    if (!asUuids) return id;
    const hex = uuidHex(id);
    if (!hex) throw fieldError(field, 'Invalid UUID format', id);
    return hex;
  });
  const duplicates = [...new Set(normalized.filter((id, i) => normalized.indexOf(id) !== i))];
  if (duplicates.length > 0) throw fieldError(field, `Duplicate ids: '${duplicates.join(', ')}'`, ids);
  return normalized;
}

/** RAGFlow's check of a JSON route's content type (validate_and_parse_json_request). */
export function requireJson(contentType: string | undefined): void {
  const mimetype = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  if (mimetype !== 'application/json') throw new RagflowError(RAGFLOW.argument, `Unsupported content type: Expected application/json, got ${contentType ?? 'None'}`);
}
