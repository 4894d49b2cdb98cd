/**
 * Uploads for file inputs (`POST /api/v1/file/upload_info`, `POST /api/v1/agents/{id}/upload`),
 * answered with RAGFlow's file descriptor; the descriptor goes into `files` or a Begin/UserFillUp
 * file field. The file is the tenant's (or the end user's), whatever agent the path names.
 */
import type { AppDeps } from '../app';
import { HttpError } from '../errors';
import { storeUpload } from '../routes/files';
import { guardOf, param, type RagflowContext, routeGroup } from './context';
import { RAGFLOW, RagflowError } from './envelope';

export function uploadRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const upload = async (c: RagflowContext) => {
    const form = await c.req.parseBody({ all: true }).catch(() => {
      throw new RagflowError(RAGFLOW.argument, 'Provide multipart file(s).');
    });
    const parts = ([] as unknown[]).concat(form.file ?? []);
    if (parts.length === 0) throw new RagflowError(RAGFLOW.argument, 'Provide multipart file(s).');
    const principal = c.get('principal');
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
  };
  app.post('/file/upload_info', guard(upload));
  app.post('/agents/:id/upload', guard(async (c) => {
    param(c, 'id');
    return upload(c);
  }));
  return app;
}
