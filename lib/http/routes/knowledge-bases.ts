/**
 * `/workflows/v1/knowledge-bases`: a tenant's knowledge bases, their documents and chunks, and
 * a test search — admin keys only (execute keys and end-user tokens get 403 before anything is
 * read). Another tenant's ids answer exactly as missing ones (404).
 *
 *   POST   /                              {name, backend?, local|ragflow|bedrock?, ...}  201
 *   GET    /?limit=&cursor=               {items, next_cursor}, newest first
 *   GET    /{id}, PATCH /{id}, DELETE /{id}
 *   POST   /{id}/documents?parse=false    multipart, one or more `file` parts        201 {items}
 *   GET    /{id}/documents?limit=&cursor=&keywords=
 *   GET    /{id}/documents/{doc}, DELETE /{id}/documents/{doc}
 *   POST   /{id}/documents/parse          {document_ids}                              200 {items}
 *   GET    /{id}/documents/{doc}/chunks?limit=&cursor=&keywords=
 *   POST   /{id}/search                   {question, top_n?, ...}                    {chunks, doc_aggs, total}
 *
 * Documents are parsed when they are uploaded unless `?parse=false`: the service parses within
 * the request (there is no background worker between requests), so one upload leaves a
 * knowledge base searchable, and its answer already says DONE or FAIL with the reason. Upload
 * many with `parse=false`, then parse them in one call: the index is rebuilt once.
 */
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { EaselError } from '../../errors';
import type { KnowledgeAdmin, ListOptions } from '../../knowledge/types';
import type { AppDeps, AppEnv } from '../app';
import { requireAdmin } from '../auth';
import { decodePageCursor, encodePageCursor } from '../cursor';
import { HttpError, validationHook } from '../errors';
import { fileParts, knowledgeOf, maxDocumentBytes, MULTIPART_OVERHEAD_BYTES, readDocument, searchKnowledge, uploadAll } from '../knowledge';
import { ErrorSchema } from '../schemas';
import {
  ChunkSchema,
  chunkingOf,
  chunkView,
  CreateKnowledgeBase,
  DocParam,
  DocumentSchema,
  documentView,
  KbParam,
  KnowledgeBaseSchema,
  knowledgeBaseView,
  ListQuery,
  newKnowledgeBase,
  ParseBody,
  SearchBody,
  SearchResultSchema,
  UpdateKnowledgeBase,
  UploadQuery,
} from './knowledge-schemas';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const page = (item: z.ZodType) => z.object({ items: z.array(item), next_cursor: z.string().nullable() });
const errors = {
  400: json(ErrorSchema, 'invalid request (the field is named)'),
  403: json(ErrorSchema, 'not an admin key'),
  404: json(ErrorSchema, 'no such knowledge base or document (another tenant’s included)'),
};
const newestFirst = { orderby: 'create_time', desc: true } as const satisfies Partial<ListOptions>;

/** The page a `limit` and `cursor` ask for, and the cursor of the next one. */
function paging(query: { limit: number; cursor?: string | undefined }) {
  const from = decodePageCursor(query.cursor) ?? { page: 1, pageSize: query.limit };
  return {
    page: from.page,
    page_size: from.pageSize,
    next: (total: number) => encodePageCursor(from.page * from.pageSize < total ? { page: from.page + 1, pageSize: from.pageSize } : undefined),
  };
}

/**
 * The knowledge service names the field a refusal is about at the start of its message
 * (`name: a knowledge base named "X" exists already`); answers name it in `field` too, as every
 * other refusal of one field does.
 */
function withField(error: unknown): unknown {
  if (!(error instanceof EaselError) || error instanceof HttpError || error.code !== 'invalid_request') return error;
  const field = /^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*): /.exec(error.message)?.[1];
  return field ? new HttpError('invalid_request', error.message, { field }) : error;
}

export function knowledgeBaseRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  // answered by the app's own error mapping, with the field named
  app.onError((error) => {
    throw withField(error);
  });
  const maxBytes = maxDocumentBytes(deps);
  /** The tenant of an admin key, and the service; anything else is refused before a read. */
  const admin = (c: { get(key: 'principal'): AppEnv['Variables']['principal'] }): { tenant: string; knowledge: KnowledgeAdmin } => {
    const principal = c.get('principal');
    requireAdmin(principal);
    return { tenant: principal.tenant, knowledge: knowledgeOf(deps) };
  };

  app.use('/:id/documents', async (c, next) => {
    if (c.req.method !== 'POST') return next();
    return bodyLimit({
      maxSize: maxBytes + MULTIPART_OVERHEAD_BYTES,
      onError: () => {
        throw new HttpError('payload_too_large', `the upload is over ${maxBytes} bytes of documents (one request carries at most ${maxBytes} bytes)`, { limit: maxBytes });
      },
    })(c, next);
  });

  app.openapi(
    createRoute({
      method: 'post',
      path: '/',
      summary: 'Create a knowledge base (local by default; or a RAGFlow server’s datasets, or a Bedrock knowledge base)',
      request: { body: { content: { 'application/json': { schema: CreateKnowledgeBase } }, required: true } },
      responses: { 201: json(KnowledgeBaseSchema, 'created'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      return c.json(knowledgeBaseView(await knowledge.create(tenant, newKnowledgeBase(c.req.valid('json')))), 201);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/', summary: 'The tenant’s knowledge bases, newest first', request: { query: ListQuery }, responses: { 200: json(page(KnowledgeBaseSchema), 'knowledge bases'), ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const p = paging(c.req.valid('query'));
      const listed = await knowledge.list(tenant, { page: p.page, page_size: p.page_size, ...newestFirst });
      return c.json({ items: listed.items.map(knowledgeBaseView), next_cursor: p.next(listed.total) }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/{id}', summary: 'A knowledge base', request: { params: KbParam }, responses: { 200: json(KnowledgeBaseSchema, 'the knowledge base'), ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      return c.json(knowledgeBaseView(await knowledge.get(tenant, c.req.valid('param').id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/{id}',
      summary: 'Change a knowledge base’s name, description, aliases or (local) chunking and embedding model',
      request: { params: KbParam, body: { content: { 'application/json': { schema: UpdateKnowledgeBase } }, required: true } },
      responses: { 200: json(KnowledgeBaseSchema, 'the knowledge base'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const body = c.req.valid('json');
      const chunking = body.chunking ? chunkingOf(body.chunking) : undefined;
      const patch = {
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.description !== undefined ? { description: body.description } : {}),
        ...(body.aliases !== undefined ? { aliases: body.aliases } : {}),
        ...(chunking ? { chunking } : {}),
        ...(body.embedding_model !== undefined ? { embedding_model: body.embedding_model } : {}),
      };
      return c.json(knowledgeBaseView(await knowledge.update(tenant, c.req.valid('param').id, patch)), 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/{id}', summary: 'Delete a knowledge base with its documents, chunks and index', request: { params: KbParam }, responses: { 204: { description: 'deleted' }, ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      await knowledge.delete(tenant, c.req.valid('param').id);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/{id}/documents',
      summary: 'Upload documents (multipart, one or more parts named "file"), parsed unless ?parse=false',
      request: {
        params: KbParam,
        query: UploadQuery,
        body: { content: { 'multipart/form-data': { schema: z.object({ file: z.any().openapi({ type: 'array', items: { type: 'string', format: 'binary' } }) }) } }, required: true },
      },
      responses: { 201: json(z.object({ items: z.array(DocumentSchema) }), 'stored (and parsed: DONE, or FAIL with the reason in progress_msg)'), 413: json(ErrorSchema, 'a document over the limit'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const { id } = c.req.valid('param');
      // a missing knowledge base is answered before the body is read
      await knowledge.get(tenant, id);
      const form = await c.req.parseBody({ all: true }).catch(() => {
        throw new HttpError('invalid_request', 'the body is not multipart/form-data', { field: 'body' });
      });
      const parts = fileParts(form);
      if (parts.length === 0) throw new HttpError('invalid_request', 'file: send one or more documents as multipart/form-data parts named "file"', { field: 'file' });
      const docs = [];
      for (const part of parts) docs.push(await readDocument(part, maxBytes));
      const stored = await uploadAll(knowledge, tenant, id, docs);
      const answered = c.req.valid('query').parse === 'false' ? stored : await knowledge.parse(tenant, id, stored.map((d) => d.id));
      return c.json({ items: answered.map(documentView) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/{id}/documents',
      summary: 'A knowledge base’s documents with their parse status, newest first',
      request: { params: KbParam, query: ListQuery.extend({ keywords: z.string().max(256).optional().openapi({ description: 'Part of the name' }) }) },
      responses: { 200: json(page(DocumentSchema), 'documents'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const query = c.req.valid('query');
      const p = paging(query);
      const listed = await knowledge.listDocuments(tenant, c.req.valid('param').id, { page: p.page, page_size: p.page_size, ...newestFirst, ...(query.keywords ? { keywords: query.keywords } : {}) });
      return c.json({ items: listed.items.map(documentView), next_cursor: p.next(listed.total) }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'post', path: '/{id}/documents/parse', summary: 'Parse (or parse again) documents; answers them DONE or FAIL', request: { params: KbParam, body: { content: { 'application/json': { schema: ParseBody } }, required: true } }, responses: { 200: json(z.object({ items: z.array(DocumentSchema) }), 'the documents after parsing'), ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const ids = [...new Set(c.req.valid('json').document_ids)];
      return c.json({ items: (await knowledge.parse(tenant, c.req.valid('param').id, ids)).map(documentView) }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/{id}/documents/{doc}', summary: 'A document and its parse status', request: { params: DocParam }, responses: { 200: json(DocumentSchema, 'the document'), ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const { id, doc } = c.req.valid('param');
      return c.json(documentView(await knowledge.getDocument(tenant, id, doc)), 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/{id}/documents/{doc}', summary: 'Delete a document and its chunks (searches no longer find them)', request: { params: DocParam }, responses: { 204: { description: 'deleted' }, ...errors } }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const { id, doc } = c.req.valid('param');
      // the service deletes what exists; a missing document is answered as such
      await knowledge.getDocument(tenant, id, doc);
      await knowledge.deleteDocuments(tenant, id, [doc]);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/{id}/documents/{doc}/chunks',
      summary: 'A document’s chunks, in document order',
      request: { params: DocParam, query: ListQuery.extend({ keywords: z.string().max(256).optional().openapi({ description: 'Words the content contains' }) }) },
      responses: { 200: json(page(ChunkSchema), 'chunks'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const { id, doc } = c.req.valid('param');
      const query = c.req.valid('query');
      const p = paging(query);
      const listed = await knowledge.listChunks(tenant, id, doc, { page: p.page, page_size: p.page_size, ...(query.keywords ? { keywords: query.keywords } : {}) });
      return c.json({ items: listed.items.map(chunkView), next_cursor: p.next(listed.total) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/{id}/search',
      summary: 'A test search: the chunks a Retrieval of this knowledge base would find',
      request: { params: KbParam, body: { content: { 'application/json': { schema: SearchBody } }, required: true } },
      responses: { 200: json(SearchResultSchema, 'chunks best first, and their documents'), ...errors },
    }),
    async (c) => {
      const { tenant, knowledge } = admin(c);
      const kb = await knowledge.get(tenant, c.req.valid('param').id);
      const body = c.req.valid('json');
      const result = await searchKnowledge(knowledge, tenant, [kb], {
        question: body.question,
        top_n: body.top_n,
        top_k: body.top_k,
        similarity_threshold: body.similarity_threshold,
        keywords_similarity_weight: body.keywords_similarity_weight,
        ...(body.document_ids ? { doc_ids: body.document_ids } : {}),
        ...(body.highlight !== undefined ? { highlight: body.highlight } : {}),
        ...(body.page !== undefined ? { page: body.page } : {}),
      }, c.req.raw.signal);
      return c.json({ chunks: result.chunks, doc_aggs: result.doc_aggs, total: result.total }, 200);
    },
  );

  return app;
}
