/**
 * The rest of RAGFlow's API (chats, files, memories, searches, webhooks, the dataset routes
 * beyond datasets, documents, parsing, chunk listing and retrieval, ...) and any other path under /api/v1: answered inside the envelope, code 103, with
 * a message naming the operation — never a bare 404. Path segments that are not plain words
 * show as `{id}`, so the answer does not echo what was sent.
 */
import type { Context } from 'hono';
import { routeGroup } from './context';
import { failure, RAGFLOW } from './envelope';

const WORD = /^[a-z][a-z0-9_.-]{0,40}$/;

export function unsupported(c: Context): Response {
  const route = c.req.path.split('/').map((s, i) => (i < 3 || WORD.test(s) ? s : '{id}')).join('/');
  return failure(c, RAGFLOW.operation, `${c.req.method} ${route} is not supported by Easel (it serves RAGFlow's agent API: agents, sessions, completions and uploads; of its dataset API: datasets, their documents, parsing, chunk listing and retrieval; and its MCP servers).`);
}

/** RAGFlow's agent routes that `GET /agents/{id}` would take for an id: mounted before it. */
export function shadowedRoutes() {
  const app = routeGroup();
  app.get('/prompts', unsupported);
  app.get('/download', unsupported);
  return app;
}
