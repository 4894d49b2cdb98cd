/**
 * RAGFlow-compatible routes under /api/v1: the same keys, tenants, workflows, runs and knowledge
 * bases as the native API (agents, sessions, completions, uploads; datasets, their documents,
 * parsing, chunks, retrieval; MCP servers), in RAGFlow's envelope and codes, so its SDK and documented
 * calls work unchanged.
 * Each group of routes is a Hono app of its own, mounted here in an order that lets fixed paths
 * (`/agents/templates`, `/agents/tags`, `/agents/prompts`) win over `/agents/{id}`; whatever
 * else comes under /api/v1 is answered as unsupported, inside the envelope.
 */
import type { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { createMiddleware } from 'hono/factory';
import { compatRouteRefusal } from '../access';
import type { AppDeps } from '../app';
import { HttpError } from '../errors';
import { maxDocumentBytes, MULTIPART_OVERHEAD_BYTES } from '../knowledge';
import { DEFAULT_MAX_FILE_BYTES } from '../routes/files';
import { agentRoutes } from './agents';
import { chunkRoutes } from './chunks';
import { datasetRoutes } from './datasets';
import { documentRoutes } from './documents';
import { retrievalRoutes } from './retrieval';
import { completionRoutes } from './completions';
import type { RagflowEnv } from './context';
import { RAGFLOW } from './envelope';
import { inputFormRoutes } from './input-form';
import { logRoutes } from './logs';
import { mcpServerRoutes } from './mcp-servers';
import { resetRoutes } from './reset';
import { sessionRoutes } from './sessions';
import { tagRoutes } from './tags';
import { templateRoutes } from './templates';
import { shadowedRoutes, unsupported } from './unsupported';
import { uploadRoutes } from './uploads';
import { versionRoutes } from './versions';

export function registerRagflowRoutes(app: Hono<RagflowEnv>, deps: AppDeps): void {
  app.use('/api/v1/*', authenticate(deps));
  app.use('/api/v1/*', limitBody(deps));

  app.route('/api/v1/agents', templateRoutes(deps));
  app.route('/api/v1/agents', tagRoutes(deps));
  app.route('/api/v1/agents', shadowedRoutes());
  app.route('/api/v1/agents', agentRoutes(deps));
  app.route('/api/v1/agents/:id/sessions', sessionRoutes(deps));
  app.route('/api/v1/agents/:id/versions', versionRoutes(deps));
  app.route('/api/v1/agents/:id', resetRoutes(deps));
  app.route('/api/v1/agents/:id', inputFormRoutes(deps));
  app.route('/api/v1/agents/:id', logRoutes(deps));
  app.route('/api/v1', completionRoutes(deps));
  app.route('/api/v1', uploadRoutes(deps));
  app.route('/api/v1/datasets', datasetRoutes(deps));
  app.route('/api/v1/datasets/:id/documents', documentRoutes(deps));
  app.route('/api/v1/datasets/:id', chunkRoutes(deps));
  app.route('/api/v1', retrievalRoutes(deps));
  app.route('/api/v1/mcp/servers', mcpServerRoutes(deps));
  app.all('/api/v1/*', unsupported);
}

/** Authorization, answered in RAGFlow's words; an execute key needs an end-user token here. */
function authenticate(deps: AppDeps) {
  return createMiddleware<RagflowEnv>(async (c, next) => {
    const header = c.req.header('authorization');
    if (!header) return c.json({ code: 0, message: '`Authorization` can\'t be empty', data: false });
    if (header.trim().split(/\s+/).length < 2) return c.json({ code: 0, message: 'Please check your authorization format.', data: false });
    let principal;
    try {
      principal = await deps.auth.authenticate({ authorization: header });
    } catch (error) {
      if (error instanceof HttpError && error.code === 'unauthorized') {
        // a bad end-user token says what is wrong with it; a bad key gets RAGFlow's own words
        const message = error.extra.field === 'Easel-End-User-Token' ? `Authentication error: ${error.message}.` : 'Authentication error: API key is invalid!';
        return c.json({ code: RAGFLOW.auth, message, data: false });
      }
      throw error;
    }
    const refusal = compatRouteRefusal(principal);
    if (refusal) return c.json({ code: RAGFLOW.auth, message: refusal, data: false });
    c.set('principal', principal);
    await next();
  });
}

/** Request bodies: uploads up to the file (or document) limit, everything else up to the body limit. */
function limitBody(deps: AppDeps) {
  const maxFile = deps.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const maxDocument = maxDocumentBytes(deps);
  const maxBody = deps.limits?.maxBodyBytes ?? 1024 * 1024;
  return createMiddleware<RagflowEnv>((c, next) => {
    const isUpload = c.req.path === '/api/v1/file/upload_info' || /^\/api\/v1\/agents\/[^/]+\/upload$/.test(c.req.path);
    const isDocument = c.req.method === 'POST' && /^\/api\/v1\/datasets\/[^/]+\/documents$/.test(c.req.path);
    const max = isDocument ? maxDocument : isUpload ? maxFile : undefined;
    return bodyLimit({
      maxSize: max === undefined ? maxBody : max + MULTIPART_OVERHEAD_BYTES,
      onError: (ctx) => {
        ctx.header('connection', 'close');
        const message = isDocument ? `The documents are over ${max} bytes (one request carries at most ${max} bytes).` : isUpload ? `The file is over ${max} bytes.` : `The request body is over ${maxBody} bytes.`;
        return ctx.json({ code: RAGFLOW.argument, message });
      },
    })(c, next);
  });
}
