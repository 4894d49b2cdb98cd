/**
 * File uploads for `file` form fields: multipart/form-data with one `file` part, up to
 * EASEL_MAX_FILE_BYTES (its own limit, not the JSON body limit). The id goes into a turn's
 * inputs; files expire unless a run uses them. A file belongs to whoever it was uploaded for
 * (lib/http/access.ts): the run of the run token, the end user, or — a bare execute key's
 * upload — nobody yet: that upload is answered with a `file_token`, which the turn naming the
 * file sends instead of its id, and the file is that run's from then on.
 */
import { randomBytes } from 'node:crypto';
import { createRoute, z } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { deleteFile, getFile, putFile, type StoredFile } from '../../store/files';
import type { App, AppDeps } from '../app';
import { type AccessTokens, mayReadFile, uploadOwner } from '../access';
import { type Principal, requireAdmin } from '../auth';
import { HttpError } from '../errors';
import { ErrorSchema } from '../schemas';

export const DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024;
const FileId = z.object({ id: z.string().regex(/^file_[0-9a-f]{32}$/) });
const FileSchema = z
  .object({
    file_id: z.string(),
    name: z.string(),
    size: z.number().int(),
    mime_type: z.string(),
    created_at: z.string(),
    file_token: z.string().optional().describe('An upload with a bare execute key: what the turn that uses the file sends in place of file_id'),
  })
  .openapi('File');

export function fileView(f: StoredFile) {
  return { file_id: f.id, name: f.name, size: f.size, mime_type: f.mimeType, created_at: f.createdAt };
}

/** A bare execute key's upload gets the token it names the file with; nobody else needs one. */
export async function fileTokenFor(principal: Principal, access: AccessTokens | undefined, file: StoredFile): Promise<{ file_token?: string }> {
  if (principal.scope === 'admin' || file.owner !== undefined || !access) return {};
  return { file_token: await access.fileTokens.sign(principal.tenant, file.id) };
}

/** Reads the `file` part of a multipart request and stores it for the principal, as its owner. */
export async function storeUpload(deps: AppDeps, principal: Principal, form: Record<string, unknown>): Promise<StoredFile> {
  const tenant = principal.tenant;
  const owner = uploadOwner(principal);
  const max = deps.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const part = form.file;
  if (!(part instanceof File)) throw new HttpError('invalid_request', 'file: send the file as a multipart/form-data part named "file"');
  if (part.size > max) throw new HttpError('payload_too_large', `the file is ${part.size} bytes; at most ${max} are accepted`);
  const bytes = new Uint8Array(await part.arrayBuffer());
  return putFile(deps.engine.store, {
    tenant,
    id: `file_${randomBytes(16).toString('hex')}`,
    name: (part.name || 'file').slice(0, 255),
    size: bytes.length,
    mimeType: (part.type || 'application/octet-stream').split(';')[0]?.trim() || 'application/octet-stream',
    createdAt: new Date().toISOString(),
    ...(owner ? { owner } : {}),
  }, bytes);
}

export function registerFileRoutes(app: App, deps: AppDeps): void {
  const max = deps.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  app.use('/workflows/v1/files', bodyLimit({
    maxSize: max + 64 * 1024,
    onError: () => {
      throw new HttpError('payload_too_large', `the file is over ${max} bytes`);
    },
  }));

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/files',
      summary: 'Upload a file for a form field (multipart/form-data, part "file")',
      request: { body: { content: { 'multipart/form-data': { schema: z.object({ file: z.any().openapi({ type: 'string', format: 'binary' }) }) } }, required: true } },
      responses: {
        201: { description: 'stored', content: { 'application/json': { schema: FileSchema } } },
        413: { description: 'too large', content: { 'application/json': { schema: ErrorSchema } } },
      },
    }),
    async (c) => {
      const form = await c.req.parseBody().catch(() => {
        throw new HttpError('invalid_request', 'the body is not multipart/form-data');
      });
      const principal = c.get('principal');
      const file = await storeUpload(deps, principal, form);
      return c.json({ ...fileView(file), ...(await fileTokenFor(principal, deps.access, file)) }, 201);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/workflows/v1/files/{id}', summary: 'A file’s metadata', request: { params: FileId }, responses: { 200: { description: 'the file', content: { 'application/json': { schema: FileSchema } } } } }),
    async (c) => {
      const principal = c.get('principal');
      const file = await getFile(deps.engine.store, principal.tenant, c.req.valid('param').id);
      // answered as a missing file: the key learns nothing about uploads that are not its own
      if (!mayReadFile(principal, file)) throw new HttpError('not_found', 'file not found');
      return c.json(fileView(file), 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/workflows/v1/files/{id}', summary: 'Delete a file', request: { params: FileId }, responses: { 204: { description: 'deleted' } } }),
    async (c) => {
      // execute keys may upload; deleting is for admin keys
      requireAdmin(c.get('principal'));
      await deleteFile(deps.engine.store, c.get('principal').tenant, c.req.valid('param').id);
      return c.body(null, 204);
    },
  );
}
