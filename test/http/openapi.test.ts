/**
 * The OpenAPI document (`GET /openapi.json`) describes both faces: the native routes from their
 * zod schemas, and every RAGFlow-compatible route the app serves (the list read from the app's
 * own routes, so a route added without a description fails here), each with its methods, body,
 * RAGFlow's envelope and who may call it; and it describes no route the app does not serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, openapiDocumentFor } from '../../lib/http/app';
import { RAGFLOW_ROUTES, RAGFLOW_TAG } from '../../lib/http/ragflow/openapi';
import { inertDeps } from '../../scripts/bundle-functions';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

interface Operation {
  tags?: string[];
  security?: Record<string, string[]>[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  parameters?: { name: string; in: string }[];
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { additionalProperties?: unknown; properties?: Record<string, unknown> }> };
  tags: { name: string; description: string }[];
}

const app = createApp(inertDeps());
/** Every method and path the app serves under /api/v1, in OpenAPI's form (`{id}`). */
const served = app.routes
  .filter((r) => r.path.startsWith('/api/v1/') && r.method !== 'ALL')
  .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
let document: Document;
let api: Served;
beforeAll(async () => {
  document = (await openapiDocumentFor(inertDeps())) as Document;
  api = await serveApp(testEngine());
});
afterAll(async () => {
  await api.close();
});

describe('the RAGFlow-compatible routes in the OpenAPI document', () => {
  it('are read from the app: every route under /api/v1 is a method and a path, or the catch-all and its middleware', () => {
    expect(served.length).toBeGreaterThan(40);
    // a route registered for every method would escape the list below: only the catch-all may be one
    expect(new Set(app.routes.filter((r) => r.path.startsWith('/api/v1/') && r.method === 'ALL').map((r) => r.path))).toEqual(new Set(['/api/v1/*']));
  });

  it('describe every route the app serves, and none it does not', () => {
    const described = Object.entries(document.paths)
      .filter(([path]) => path.startsWith('/api/v1/'))
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`));
    expect([...new Set(served)].filter((route) => !described.includes(route))).toEqual([]);
    expect(described.filter((route) => !served.includes(route))).toEqual([]);
    expect(described.length).toBe(RAGFLOW_ROUTES.length);
  });

  it('each has RAGFlow’s envelope, its tag, who may call it, and its body', () => {
    for (const [path, operations] of Object.entries(document.paths).filter(([p]) => p.startsWith('/api/v1/'))) {
      for (const [method, op] of Object.entries(operations)) {
        const where = `${method} ${path}`;
        expect(op.tags, where).toEqual([RAGFLOW_TAG]);
        expect(op.security, where).toEqual(path.endsWith('/webhook') ? [] : [{ bearer: [] }]);
        const json = op.responses['200']?.content?.['application/json']?.schema as { properties?: Record<string, unknown> } | undefined;
        expect(json, where).toBeDefined();
        if (path !== '/api/v1/agents_openai/{id}/chat/completions') expect(Object.keys(json?.properties ?? {}), where).toEqual(['code', 'message', 'data']);
        const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        expect((op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name), where).toEqual(params);
      }
    }
    const completion = document.paths['/api/v1/agents/chat/completions']?.post;
    expect(Object.keys(completion?.requestBody?.content ?? {})).toEqual(['application/json']);
    expect(Object.keys(completion?.responses['200']?.content ?? {})).toEqual(['application/json', 'text/event-stream']);
    expect(completion?.parameters?.map((p) => `${p.in} ${p.name}`)).toEqual(['header idempotency-key']);
    expect(Object.keys(document.paths['/api/v1/datasets/{id}/documents']?.post?.requestBody?.content ?? {})).toEqual(['multipart/form-data']);
    expect(document.components.schemas.RagflowCompletion?.properties).toHaveProperty('question');
    expect(document.components.schemas.RagflowCompletionAnswer?.properties).toHaveProperty('notice');
    expect(document.components.schemas.RagflowCreateDataset?.properties).toHaveProperty('parser_config');
    expect(document.tags.find((t) => t.name === RAGFLOW_TAG)?.description).toContain('{code, message, data}');
  });
});

describe('GET /openapi.json', () => {
  it('serves one document with both faces; the execute body is strict and the response names its notice', async () => {
    const served = await api.call('GET', '/openapi.json', { key: null });
    expect(served.status).toBe(200);
    expect(served.json).toEqual(document);
    expect(document.openapi).toBe('3.1.0');
    expect(document.paths['/workflows/v1/workflows/{id}/execute']?.post).toBeDefined();
    expect(document.paths['/api/v1/agents_openai/{id}/chat/completions']?.post).toBeDefined();
    expect(document.components.schemas.ExecuteRequest?.additionalProperties).toBe(false);
    expect(document.components.schemas.RunInput?.additionalProperties).toBe(false);
    expect(document.components.schemas.TurnResponse?.properties).toHaveProperty('notice');
  });
});
