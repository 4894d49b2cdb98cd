/**
 * The RAGFlow-compatible routes (/api/v1) in the OpenAPI document. They are plain Hono routes
 * (their clients send extra keys, which a schema would refuse), so they are described here, one
 * entry per route, and added to the native routes' generated document: one document at
 * `GET /openapi.json`, tagged by face, because both faces share the server, the keys and the
 * `bearer` scheme, and tools that read one document then see every route. This module is
 * loaded only to generate the document (`npm run bundle`, or the first `GET /openapi.json`
 * without a packaged one), never at a function's init.
 *
 * test/http/openapi.test.ts checks that every route the app serves under /api/v1 has an entry
 * here, and every entry a route.
 */
import { OpenAPIHono, z } from '@hono/zod-openapi';
import { OPENAPI_INFO } from '../openapi';
import { CreateDatasetReq as CreateDataset, DeleteReq as DeleteIds, UpdateDatasetReq as UpdateDataset } from './dataset-requests';

export const RAGFLOW_TAG = 'RAGFlow-compatible';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'head';

/** Who may call a route: an admin key; any key (an execute key with an end-user token appended); or no key at all. */
type Access = 'admin' | 'any' | 'none';

export interface RagflowRouteDoc {
  method: Method;
  /** OpenAPI form: `/api/v1/agents/{id}`. */
  path: string;
  summary: string;
  description?: string;
  access: Access;
  query?: Record<string, z.ZodType>;
  /** A JSON body (RAGFlow's routes take keys beyond those named), or multipart `file` parts. */
  body?: z.ZodType | 'multipart';
  /** The envelope's `data` on success. */
  data?: z.ZodType;
  /** The answer on success when it is not the envelope (the OpenAI route). */
  answer?: z.ZodType;
  /** Answers `text/event-stream` when the body asks for `stream: true`. */
  streams?: boolean;
  /** Takes an `Idempotency-Key` header (the completion routes). */
  idempotent?: boolean;
}

const ENVELOPE_CODES = '0 success; 100 unexpected; 101 bad argument; 102 not found (or data); 103 refused (conflict, scope, spent quota with a `Retry-After` header, a route Easel does not serve); 109 authentication';

const Code = z.number().int().openapi('RagflowCode', { description: ENVELOPE_CODES });
const Message = z.string().openapi('RagflowMessage', { description: 'On failure, what went wrong; on some successes "success" (or an import\u2019s warnings, where RAGFlow says "success")' });

/** RAGFlow's envelope: HTTP 200 whatever happened, `code` says what. */
function envelope(data: z.ZodType = z.unknown()) {
  return z.object({ code: Code, message: Message.optional(), data: data.optional() });
}

const Loose = (description: string, fields: Record<string, z.ZodType> = {}) => z.looseObject(fields).openapi({ description });
const Page = {
  page: z.coerce.number().int().min(1).optional(),
  page_size: z.coerce.number().int().min(1).max(100).optional(),
  orderby: z.string().optional(),
  desc: z.string().optional().openapi({ description: '"false" for ascending; anything else descending' }),
};

const Agent = z
  .looseObject({
    id: z.string(),
    title: z.string(),
    description: z.string().nullable(),
    canvas_type: z.string().nullable(),
    canvas_category: z.string(),
    tags: z.string(),
    version: z.number().int(),
    create_time: z.number(),
    update_time: z.number(),
    dsl: z.record(z.string(), z.unknown()).optional().openapi({ description: 'The active version\u2019s DSL (not in listings)' }),
  })
  .openapi('RagflowAgent', { description: 'A workflow as RAGFlow shows an agent' });

const AgentBody = z
  .looseObject({
    title: z.union([z.string(), z.record(z.string(), z.string())]).optional().openapi({ description: 'Required on create; a template file\u2019s `{en, ...}` takes its English text' }),
    dsl: z.record(z.string(), z.unknown()).optional().openapi({ description: 'A RAGFlow canvas DSL; required on create; on update it adds and activates a version' }),
    description: z.union([z.string(), z.record(z.string(), z.string())]).nullish(),
    canvas_type: z.string().nullish(),
    canvas_category: z.enum(['agent_canvas', 'dataflow_canvas']).optional(),
    drop_unsupported_tools: z.boolean().optional(),
  })
  .openapi('RagflowAgentBody');

const Session = z
  .looseObject({
    id: z.string(),
    agent_id: z.string(),
    user_id: z.string(),
    name: z.string(),
    messages: z.array(z.looseObject({ role: z.string(), content: z.string() })),
    status: z.string(),
    turn_number: z.number().int(),
    dsl: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('RagflowSession', { description: 'A run as RAGFlow shows a session (session id == run id)' });

const Notice = z.object({ code: z.literal('query_not_used'), message: z.string() }).openapi('RagflowNotice', {
  description: 'Text sent while the session waits for a form, with no values for it: recorded, and the form asked again',
});

const CompletionBody = z
  .looseObject({
    agent_id: z.string().optional().openapi({ description: 'Required on /agents/chat/completions' }),
    query: z.union([z.string(), z.record(z.string(), z.unknown())]).optional().openapi({ description: 'The message; an object maps its keys onto Begin\u2019s fields' }),
    question: z.string().optional().openapi({ description: 'RAGFlow\u2019s other name for `query`' }),
    session_id: z.string().optional().openapi({ description: 'Continue this session; absent: a new one' }),
    stream: z.boolean().optional(),
    inputs: z.record(z.string(), z.unknown()).optional().openapi({ description: 'Begin\u2019s or the waiting form\u2019s values, `{name: {type, value}}` or raw' }),
    user_id: z.string().optional(),
    return_trace: z.boolean().optional(),
    files: z.array(z.unknown()).optional().openapi({ description: 'Upload descriptors (`/agents/{id}/upload`)' }),
    'openai-compatible': z.boolean().optional().openapi({ description: 'Answer as the OpenAI route (then `messages`)' }),
  })
  .openapi('RagflowCompletion');

const CompletionAnswer = z
  .looseObject({
    event: z.string(),
    message_id: z.string(),
    created_at: z.number(),
    task_id: z.string(),
    session_id: z.string(),
    data: z.looseObject({ content: z.string().optional() }),
    notice: Notice.optional(),
  })
  .openapi('RagflowCompletionAnswer', { description: 'The answer built as RAGFlow builds it, by the session\u2019s path (docs/ragflow-api.md); `notice` is Easel\u2019s' });

const OpenAIBody = z
  .looseObject({
    messages: z.array(z.looseObject({ role: z.string(), content: z.unknown() })).min(1),
    model: z.string().optional().openapi({ description: 'Not needed: the agent is the model' }),
    stream: z.boolean().optional(),
    session_id: z.string().optional(),
    metadata: z.looseObject({ session_id: z.string().optional(), inputs: z.unknown().optional() }).optional().openapi({ description: '`inputs`: the form\u2019s values, an object or its JSON text' }),
    inputs: z.record(z.string(), z.unknown()).optional(),
    user: z.string().optional(),
  })
  .openapi('OpenAIChatRequest');

const OpenAIAnswer = z
  .looseObject({
    id: z.string().openapi({ description: 'The session id' }),
    object: z.literal('chat.completion'),
    model: z.string(),
    choices: z.array(z.looseObject({ index: z.number(), message: z.looseObject({ role: z.string(), content: z.string() }), finish_reason: z.string() })),
    usage: z.looseObject({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() }),
    easel: z.object({ session_id: z.string(), status: z.string(), turn_number: z.number().nullable(), next_input_hint: z.unknown().nullable(), notice: Notice.nullable() }),
  })
  .openapi('OpenAIChatCompletion');

const Dataset = Loose('A knowledge base in RAGFlow\u2019s dataset fields (`chunk_method`, `parser_config`, `document_count`, `chunk_count`, `token_num`, ...)', { id: z.string(), name: z.string() }).openapi('RagflowDataset');
const KbDocument = Loose('A knowledge base document in RAGFlow\u2019s fields (`run`, `progress`, `progress_msg`, `chunk_count`, ...)', { id: z.string(), name: z.string(), run: z.string() }).openapi('RagflowDocument');
const Chunk = Loose('A chunk in RAGFlow\u2019s fields', { id: z.string(), content: z.string() }).openapi('RagflowChunk');
const McpServer = Loose('An MCP server of the registry in RAGFlow\u2019s fields (`mcp_api.py`)', { id: z.string(), name: z.string(), url: z.string(), server_type: z.string() }).openapi('RagflowMcpServer');
const McpServerBody = z.looseObject({
  name: z.string().optional(),
  url: z.string().optional(),
  server_type: z.enum(['sse', 'streamable-http']).optional(),
  description: z.string().optional(),
  headers: z.union([z.record(z.string(), z.unknown()), z.string()]).optional(),
  variables: z.union([z.record(z.string(), z.unknown()), z.string()]).optional(),
  timeout: z.number().optional().openapi({ description: 'Seconds to wait for its tool list' }),
});
const Upload = Loose('RAGFlow\u2019s file descriptor: goes into `files` or a file field', { id: z.string(), name: z.string(), size: z.number(), mime_type: z.string() });
const DocumentIds = z.looseObject({ document_ids: z.array(z.string()) });
const CreateDatasetReq = CreateDataset.openapi('RagflowCreateDataset');
const UpdateDatasetReq = UpdateDataset.openapi('RagflowUpdateDataset');
const DeleteReq = DeleteIds.openapi('RagflowDeleteIds');

/** What each path parameter names. */
const PARAMS: Record<string, string> = {
  sid: 'the session (run) id',
  vid: 'the version number',
  cid: 'the component id',
  mid: 'a completion frame\u2019s message_id',
  doc: 'the document id',
};
const paramText = (name: string, path: string) =>
  PARAMS[name] ?? (path.startsWith('/api/v1/datasets') ? 'the dataset id' : path.startsWith('/api/v1/mcp/') ? 'the MCP server id' : 'the agent (workflow) id');

/** Every route Easel serves under /api/v1, as RAGFlow documents it; see docs/ragflow-api.md. */
export const RAGFLOW_ROUTES: readonly RagflowRouteDoc[] = [
  // agents
  { method: 'get', path: '/api/v1/agents', summary: 'List agents', access: 'any', query: { ...Page, keywords: z.string().optional(), canvas_category: z.string().optional(), canvas_type: z.string().optional(), tags: z.string().optional(), owner_ids: z.string().optional(), id: z.string().optional(), title: z.string().optional(), type: z.literal('filter').optional() }, data: z.object({ canvas: z.array(Agent), total: z.number().int() }) },
  { method: 'post', path: '/api/v1/agents', summary: 'Create an agent from a DSL or a RAGFlow template file', description: 'A title another agent of the category holds, in any case, is code 102.', access: 'admin', query: { drop_unsupported_tools: z.string().optional() }, body: AgentBody, data: Agent },
  { method: 'get', path: '/api/v1/agents/templates', summary: 'The example workflows Easel ships, as RAGFlow templates', access: 'any', data: z.array(z.unknown()) },
  { method: 'get', path: '/api/v1/agents/tags', summary: 'The tags of the agents the key reaches, with counts', access: 'any', query: { canvas_category: z.string().optional() }, data: z.array(z.unknown()) },
  { method: 'get', path: '/api/v1/agents/prompts', summary: 'Not served by Easel (code 103)', access: 'any' },
  { method: 'get', path: '/api/v1/agents/download', summary: 'Not served by Easel (code 103)', access: 'any' },
  { method: 'get', path: '/api/v1/agents/{id}', summary: 'An agent with its active DSL', access: 'any', data: Agent },
  { method: 'put', path: '/api/v1/agents/{id}', summary: 'Update an agent; a `dsl` adds and activates a version', description: 'Changes only what it sends; sessions stay on their version.', access: 'admin', query: { drop_unsupported_tools: z.string().optional() }, body: AgentBody, data: z.object({ update_time: z.number() }) },
  { method: 'delete', path: '/api/v1/agents/{id}', summary: 'Delete an agent', access: 'admin', data: z.literal(true) },
  { method: 'put', path: '/api/v1/agents/{id}/tags', summary: 'Set an agent\u2019s tags', access: 'admin', body: z.looseObject({ tags: z.union([z.array(z.string()), z.string()]) }) },
  { method: 'get', path: '/api/v1/agents/{id}/versions', summary: 'The agent\u2019s versions, newest first, without DSLs', access: 'any', data: z.array(z.unknown()) },
  { method: 'get', path: '/api/v1/agents/{id}/versions/{vid}', summary: 'One version with its DSL', access: 'any', data: z.unknown() },
  { method: 'post', path: '/api/v1/agents/{id}/reset', summary: 'The DSL without run state', access: 'admin', data: z.record(z.string(), z.unknown()) },
  { method: 'get', path: '/api/v1/agents/{id}/components/{cid}/input-form', summary: 'A component\u2019s form fields or references', access: 'any', data: z.record(z.string(), z.unknown()) },
  { method: 'get', path: '/api/v1/agents/{id}/logs/{mid}', summary: 'Always `{}`: Easel keeps no completion logs by message id', access: 'any', data: z.object({}) },
  // webhook deliveries: let in by the Begin's own credentials, not by a key
  ...(['post', 'get', 'put', 'patch', 'delete', 'head'] as const).map((method): RagflowRouteDoc => ({
    method,
    path: '/api/v1/agents/{id}/webhook',
    summary: 'A webhook delivery into an agent whose Begin is in webhook mode',
    description: 'No API key: the Begin\u2019s credentials and methods decide; answers as the native `/workflows/v1/webhooks/{webhook_id}` (native errors). See docs/webhooks.md.',
    access: 'none',
    ...(method === 'get' || method === 'head' || method === 'delete' ? {} : { body: z.unknown() }),
  })),
  // sessions
  { method: 'post', path: '/api/v1/agents/{id}/sessions', summary: 'Create a session (a run at turn 0, with the prologue)', access: 'any', query: { user_id: z.string().optional() }, body: z.looseObject({ name: z.string().max(255).optional(), user_id: z.string().optional() }), data: Session },
  { method: 'get', path: '/api/v1/agents/{id}/sessions', summary: 'List sessions (an end user\u2019s own only)', description: 'Answers `total` beside `data`; with `exp_user_id`, the names of that user\u2019s sessions.', access: 'any', query: { ...Page, id: z.string().optional(), user_id: z.string().optional(), keywords: z.string().optional(), from_date: z.string().optional(), to_date: z.string().optional(), exp_user_id: z.string().optional(), dsl: z.string().optional() }, data: z.array(Session) },
  { method: 'get', path: '/api/v1/agents/{id}/sessions/{sid}', summary: 'A session with its messages and state', access: 'any', data: Session },
  { method: 'delete', path: '/api/v1/agents/{id}/sessions/{sid}', summary: 'Delete a session', access: 'admin', data: z.number().int() },
  { method: 'delete', path: '/api/v1/agents/{id}/sessions', summary: 'Delete sessions by id, or all of them', access: 'admin', body: z.looseObject({ ids: z.array(z.string()).optional(), delete_all: z.boolean().optional() }) },
  // completions
  { method: 'post', path: '/api/v1/agents/chat/completions', summary: 'Converse with an agent (`agent_id` in the body), RAGFlow\u2019s way or OpenAI\u2019s', description: 'One turn of the session. With `stream: true`, `data:{json}` frames ending `data:[DONE]`; a `notice` frame before `[DONE]` when text sent while a form waits was not used.', access: 'any', body: CompletionBody, data: CompletionAnswer, streams: true, idempotent: true },
  { method: 'post', path: '/api/v1/agents/{id}/completions', summary: 'Converse with an agent, RAGFlow\u2019s way', description: 'As /agents/chat/completions, the agent in the path.', access: 'any', body: CompletionBody, data: CompletionAnswer, streams: true, idempotent: true },
  { method: 'post', path: '/api/v1/agents_openai/{id}/chat/completions', summary: 'OpenAI chat completions with an agent', description: 'The last user message is the query; the session goes on with `session_id` (or `metadata.session_id`, `id`, `metadata.id`); every answer and chunk carries the session as `id` and an `easel` object. Failures answer in RAGFlow\u2019s envelope.', access: 'any', body: OpenAIBody, answer: OpenAIAnswer, streams: true, idempotent: true },
  // uploads
  { method: 'post', path: '/api/v1/file/upload_info', summary: 'Upload files for file inputs', access: 'any', body: 'multipart', data: z.union([Upload, z.array(Upload)]) },
  { method: 'post', path: '/api/v1/agents/{id}/upload', summary: 'Upload files for an agent\u2019s file inputs', access: 'any', body: 'multipart', data: z.union([Upload, z.array(Upload)]) },
  // datasets
  { method: 'post', path: '/api/v1/datasets', summary: 'Create a dataset (a `local` knowledge base)', description: 'Malformed bodies: code 101 in RAGFlow\u2019s words (`Field: <name> - Message: <...> - Value: <...>`).', access: 'admin', body: CreateDatasetReq, data: Dataset },
  { method: 'get', path: '/api/v1/datasets', summary: 'List datasets', access: 'admin', query: { ...Page, id: z.string().optional(), ids: z.string().optional(), name: z.string().optional(), include_parsing_status: z.string().optional() }, data: z.array(Dataset) },
  { method: 'delete', path: '/api/v1/datasets', summary: 'Delete datasets by id, or all of them', access: 'admin', body: DeleteReq, data: z.object({ success_count: z.number().int() }).optional() },
  { method: 'get', path: '/api/v1/datasets/{id}', summary: 'A dataset', access: 'admin', data: Dataset },
  { method: 'put', path: '/api/v1/datasets/{id}', summary: 'Update a dataset', access: 'admin', body: UpdateDatasetReq, data: Dataset },
  { method: 'post', path: '/api/v1/datasets/{id}/documents', summary: 'Upload documents (stored `UNSTART`)', access: 'admin', query: { type: z.string().optional() }, body: 'multipart', data: z.array(KbDocument) },
  { method: 'get', path: '/api/v1/datasets/{id}/documents', summary: 'List documents', access: 'admin', query: { ...Page, id: z.string().optional(), ids: z.string().optional(), name: z.string().optional(), keywords: z.string().optional(), run: z.string().optional(), suffix: z.string().optional(), create_time_from: z.string().optional(), create_time_to: z.string().optional() }, data: z.object({ total: z.number().int(), docs: z.array(KbDocument) }) },
  { method: 'delete', path: '/api/v1/datasets/{id}/documents', summary: 'Delete documents by id, or all of them', access: 'admin', body: DeleteReq },
  { method: 'post', path: '/api/v1/datasets/{id}/chunks', summary: 'Parse documents; answers once each is DONE or FAIL', access: 'admin', body: DocumentIds },
  { method: 'delete', path: '/api/v1/datasets/{id}/chunks', summary: 'Stop parsing documents (a parse runs within its request: nothing to stop)', access: 'admin', body: DocumentIds },
  { method: 'get', path: '/api/v1/datasets/{id}/documents/{doc}/chunks', summary: 'A document\u2019s chunks', access: 'admin', query: { ...Page, keywords: z.string().optional(), id: z.string().optional(), chunk_ids: z.string().optional() }, data: z.object({ total: z.number().int(), chunks: z.array(Chunk), doc: KbDocument }) },
  { method: 'post', path: '/api/v1/retrieval', summary: 'Search datasets', description: 'What needs a model or index Easel lacks is refused by name (code 101): a non-empty `rerank_id`, `keyword: true`, `cross_languages`, `use_kg`, `toc_enhance`, `metadata_condition`.', access: 'admin', body: z.looseObject({ dataset_ids: z.array(z.string()), question: z.string(), document_ids: z.array(z.string()).optional(), page: z.number().int().optional(), page_size: z.number().int().max(100).optional(), similarity_threshold: z.number().optional(), vector_similarity_weight: z.number().optional(), top_k: z.number().int().optional(), highlight: z.boolean().optional() }), data: z.object({ chunks: z.array(Chunk), doc_aggs: z.unknown(), total: z.number().int() }) },
  // MCP servers
  { method: 'get', path: '/api/v1/mcp/servers', summary: 'List MCP servers', access: 'admin', query: { ...Page, keywords: z.string().optional(), mcp_ids: z.string().optional() }, data: z.object({ mcp_servers: z.array(McpServer), total: z.number().int() }) },
  { method: 'post', path: '/api/v1/mcp/servers', summary: 'Register an MCP server (its tools are listed now)', access: 'admin', body: McpServerBody, data: McpServer },
  { method: 'post', path: '/api/v1/mcp/servers/import', summary: 'Register several MCP servers (`mcpServers`, as MCP clients write them)', access: 'admin', body: z.looseObject({ mcpServers: z.record(z.string(), z.unknown()), timeout: z.number().optional() }), data: z.unknown() },
  { method: 'get', path: '/api/v1/mcp/servers/{id}', summary: 'An MCP server (`?mode=download`: as an `mcpServers` file)', access: 'admin', query: { mode: z.literal('download').optional() }, data: McpServer },
  { method: 'put', path: '/api/v1/mcp/servers/{id}', summary: 'Update an MCP server (its tools are listed again)', access: 'admin', body: McpServerBody, data: McpServer },
  { method: 'delete', path: '/api/v1/mcp/servers/{id}', summary: 'Delete an MCP server', access: 'admin' },
  { method: 'post', path: '/api/v1/mcp/servers/{id}/test', summary: 'List the tools of a server description without saving it', access: 'admin', body: McpServerBody, data: z.array(z.unknown()) },
];

const ACCESS_TEXT: Record<Access, string> = {
  admin: 'An admin key.',
  any: 'An admin key, or an execute key with an end-user token appended (`Bearer <key>.<token>`: that user\u2019s sessions only).',
  none: 'No API key.',
};

/** The OpenAPI route of an entry, for a registry. */
function routeOf(doc: RagflowRouteDoc) {
  const params = [...doc.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
  const success = doc.answer ?? envelope(doc.data);
  const content: Record<string, { schema: z.ZodType }> = { 'application/json': { schema: success } };
  if (doc.streams) content['text/event-stream'] = { schema: z.string().openapi({ description: 'With `stream: true`: `data:` frames ending `data:[DONE]`' }) };
  return {
    method: doc.method,
    path: doc.path,
    tags: [RAGFLOW_TAG],
    summary: doc.summary,
    description: [doc.description, ACCESS_TEXT[doc.access]].filter(Boolean).join(' '),
    security: doc.access === 'none' ? [] : [{ bearer: [] }],
    request: {
      ...(params.length > 0 ? { params: z.object(Object.fromEntries(params.map((p) => [p, z.string().openapi({ description: paramText(p, doc.path) })]))) } : {}),
      ...(doc.query ? { query: z.object(doc.query) } : {}),
      ...(doc.idempotent ? { headers: z.object({ 'idempotency-key': z.string().optional().openapi({ description: 'A retry with the same key and body runs nothing and answers the stored turn' }) }) } : {}),
      ...(doc.body === 'multipart'
        ? { body: { content: { 'multipart/form-data': { schema: z.object({ file: z.union([z.string(), z.array(z.string())]).openapi({ description: 'One or more file parts' }) }) } } } }
        : doc.body
          ? { body: { content: { 'application/json': { schema: doc.body } } } }
          : {}),
    },
    responses: {
      200: { description: doc.answer ? 'The answer; a failure is RAGFlow\u2019s envelope `{code, message}`' : 'RAGFlow\u2019s envelope `{code, message, data}`, whatever the outcome', content },
    },
  };
}

type OpenApiDocument = ReturnType<OpenAPIHono['getOpenAPI31Document']>;

/** The native document with the RAGFlow-compatible routes added, tagged `RAGFlow-compatible`. */
export function withRagflowRoutes(native: OpenApiDocument): OpenApiDocument {
  const described = new OpenAPIHono();
  for (const doc of RAGFLOW_ROUTES) described.openAPIRegistry.registerPath(routeOf(doc) as Parameters<typeof described.openAPIRegistry.registerPath>[0]);
  const ragflow = described.getOpenAPI31Document(OPENAPI_INFO);
  return {
    ...native,
    tags: [
      ...(native.tags ?? []),
      { name: RAGFLOW_TAG, description: `RAGFlow\u2019s API under /api/v1 (docs/ragflow-api.md), with the same keys, tenants, workflows (agents) and runs (sessions) as the native API. Every answer is RAGFlow\u2019s envelope \`{code, message, data}\` with HTTP 200: ${ENVELOPE_CODES}. Requests take keys beyond those described, as RAGFlow\u2019s do. Auth: \`Authorization: Bearer <key>\`; an execute key needs an end-user token appended (\`<key>.<token>\`); without one it is code 109. Any other path under /api/v1 answers code 103 naming the route.` },
    ],
    paths: { ...native.paths, ...ragflow.paths },
    components: { ...native.components, schemas: { ...native.components?.schemas, ...ragflow.components?.schemas } },
  };
}
