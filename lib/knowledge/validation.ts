/**
 * What a knowledge base may be made of, checked where it comes in (create, update): zod schemas
 * whose problems become one EaselError('invalid_request') naming every field, as
 * `local.chunking.chunk_token_num: ...`. Defaults are filled in here, once.
 */
import { z } from 'zod';
import { EaselError } from '../errors';
import { SECRET_NAME } from '../secrets/tenant-secrets';
import { type ChunkingSettings, DEFAULT_CHUNKING, type KnowledgeBasePatch, type NewKnowledgeBase } from './types';

export const MAX_NAME_CHARS = 128;
export const MAX_DESCRIPTION_CHARS = 4096;
/** Aliases per knowledge base: each is an item written in the knowledge base's transactions (100 actions at most). */
export const MAX_ALIASES = 32;
/** RAGFlow's UI allows chunks of up to 2048 tokens. */
export const MAX_CHUNK_TOKENS = 2048;

const name = z.lazy(() => z.string().trim().min(1, 'must not be empty').max(MAX_NAME_CHARS, `must be at most ${MAX_NAME_CHARS} characters`));
const description = z.lazy(() => z.string().max(MAX_DESCRIPTION_CHARS, `must be at most ${MAX_DESCRIPTION_CHARS} characters`));
const alias = z.lazy(() => z.string().trim().min(1, 'must not be empty').max(MAX_NAME_CHARS, `must be at most ${MAX_NAME_CHARS} characters`));
const aliases = z.lazy(() => z
  .array(alias)
  .max(MAX_ALIASES, `at most ${MAX_ALIASES}`)
  .refine((list) => new Set(list).size === list.length, 'must not repeat an alias'));

const chunking = z.lazy(() => z.strictObject({
  chunk_token_num: z.number().int('must be a whole number').min(1, 'must be at least 1').max(MAX_CHUNK_TOKENS, `must be at most ${MAX_CHUNK_TOKENS}`).optional(),
  delimiter: z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters').optional(),
  overlapped_percent: z.number().min(0, 'must be 0 to 90').max(90, 'must be 0 to 90').optional(),
}));

const embeddingModel = z.lazy(() => z.string().trim().min(1, 'must not be empty').max(256, 'must be at most 256 characters'));

/** `{secret.NAME}`, never a key: a literal would end up in every listing of the knowledge base. */
const secretReference = z.lazy(() => z.string().refine(
  (v) => {
    const m = /^\{secret\.([^{}]+)\}$/.exec(v.trim());
    return m !== null && SECRET_NAME.test(m[1] ?? '');
  },
  'must be a {secret.NAME} reference to a tenant secret holding the RAGFlow API key; store the key as a secret, never in the knowledge base',
));

const httpUrl = z.lazy(() => z.string().refine((v) => {
  try {
    const url = new URL(v);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}, 'must be an http(s) URL without credentials'));

const ragflow = z.lazy(() => z.strictObject({
  base_url: httpUrl,
  api_key: secretReference,
  dataset_ids: z.array(z.string().trim().min(1, 'must not be empty').max(128)).min(1, 'must name at least one dataset').max(64, 'at most 64'),
}));

const bedrock = z.lazy(() => z.strictObject({
  knowledge_base_id: z.string().regex(/^[0-9A-Z]{10}$/, 'must be 10 upper-case letters or digits'),
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region such as us-east-1').optional(),
  filter: z.record(z.string(), z.unknown()).optional(),
}));

const common = { name, description: description.optional(), aliases: aliases.optional() };

const NewKnowledgeBaseSchema = z.lazy(() => z.discriminatedUnion('backend', [
  z.strictObject({ ...common, backend: z.literal('local'), local: z.strictObject({ chunking: chunking.optional(), embedding_model: embeddingModel.optional() }).optional() }),
  z.strictObject({ ...common, backend: z.literal('ragflow'), ragflow }),
  z.strictObject({ ...common, backend: z.literal('bedrock'), bedrock }),
], { error: () => 'backend: must be one of local, ragflow, bedrock' }));

const PatchSchema = z.lazy(() => z.strictObject({
  name: name.optional(),
  description: description.optional(),
  aliases: aliases.optional(),
  chunking: chunking.optional(),
  embedding_model: embeddingModel.nullable().optional(),
}));

export type ValidNewKnowledgeBase = z.output<typeof NewKnowledgeBaseSchema>;

export function parseNewKnowledgeBase(input: NewKnowledgeBase): ValidNewKnowledgeBase {
  return parsed(NewKnowledgeBaseSchema, input);
}

export function parsePatch(patch: KnowledgeBasePatch): z.output<typeof PatchSchema> {
  return parsed(PatchSchema, patch);
}

/** Chunking settings with RAGFlow's defaults where none are given. */
export function withChunkingDefaults(given: Partial<ChunkingSettings> | undefined, base: ChunkingSettings = DEFAULT_CHUNKING): ChunkingSettings {
  return {
    chunk_token_num: given?.chunk_token_num ?? base.chunk_token_num,
    delimiter: given?.delimiter ?? base.delimiter,
    overlapped_percent: given?.overlapped_percent ?? base.overlapped_percent,
  };
}

function parsed<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const field = issue.path.map(String).join('.');
    return field ? `${field}: ${issue.message}` : issue.message;
  });
  throw new EaselError('invalid_request', [...new Set(problems)].join('; '));
}
