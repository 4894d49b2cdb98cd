/**
 * RAGFlow-compatible routes under /api/v1: the same keys, tenants, workflows and runs as the
 * native API, in RAGFlow's envelope and codes, so its SDK and documented calls work unchanged.
 */
import type { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { compatRouteRefusal } from '../access';
import type { AppDeps } from '../app';
import type { Principal } from '../auth';
import { HttpError } from '../errors';
import { DEFAULT_MAX_FILE_BYTES, storeUpload } from '../routes/files';
import { param, registerAgentRoutes, type RagflowEnv } from './agents';
import { completionRoutes } from './completions';
import { guarded, RAGFLOW, RagflowError } from './envelope';

export function registerRagflowRoutes(app: Hono<RagflowEnv>, deps: AppDeps): void {
  const maxFile = deps.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const maxBody = deps.limits?.maxBodyBytes ?? 1024 * 1024;
  app.use('/api/v1/*', async (c, next) => {
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
  const uploads = new Set(['/api/v1/file/upload_info']);
  app.use('/api/v1/*', (c, next) => {
    const isUpload = uploads.has(c.req.path) || /^\/api\/v1\/agents\/[^/]+\/upload$/.test(c.req.path);
    return bodyLimit({
      maxSize: isUpload ? maxFile + 64 * 1024 : maxBody,
      onError: (ctx) => {
        ctx.header('connection', 'close');
        return ctx.json({ code: RAGFLOW.argument, message: isUpload ? `The file is over ${maxFile} bytes.` : `The request body is over ${maxBody} bytes.` });
      },
    })(c, next);
  });

  registerAgentRoutes(app, deps);
  app.route('/api/v1', completionRoutes(deps));

  // Uploads for file inputs: the descriptor goes into `files` or a Begin/UserFillUp file field.
  const upload = guarded(async (c) => {
    const form = await c.req.parseBody({ all: true }).catch(() => {
      throw new RagflowError(RAGFLOW.argument, 'Provide multipart file(s).');
    });
    const parts = ([] as unknown[]).concat(form.file ?? []);
    if (parts.length === 0) throw new RagflowError(RAGFLOW.argument, 'Provide multipart file(s).');
    const principal = (c as unknown as { get(k: 'principal'): Principal }).get('principal');
    const stored = [];
    for (const part of parts) {
      try {
        stored.push(await storeUpload(deps, principal, { file: part }));
      } catch (error) {
        if (error instanceof HttpError) throw new RagflowError(RAGFLOW.argument, error.message);
        throw error;
      }
    }
    const views = stored.map((f) => ({
      id: f.id,
      name: f.name,
      size: f.size,
      extension: f.name.includes('.') ? (f.name.split('.').pop() ?? '').toLowerCase() : '',
      mime_type: f.mimeType,
      created_by: principal.tenant,
      created_at: Date.parse(f.createdAt) / 1000,
      preview_url: null,
    }));
    return c.json({ code: 0, message: 'success', data: views.length === 1 ? views[0] : views });
  });
  app.post('/api/v1/file/upload_info', upload);
  app.post('/api/v1/agents/:id/upload', async (c) => {
    param(c, 'id');
    return upload(c);
  });
}
