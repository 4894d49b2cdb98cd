/**
 * `POST /workflows/v1/local/turn-queue`, served by `npm start` only: puts a message on the
 * in-process turn queue, as a scheduler or another application would send it to the SQS queue
 * on AWS. The worker gets it as an SQS record, like any other. It sits behind the API's own
 * middleware (key, body limit, JSON checks, errors); it needs an admin key, and the tenant is
 * the key's.
 */
import type { App } from '../http/app';
import { requireAdmin } from '../http/auth';
import { HttpError } from '../http/errors';
import { QueueMessage } from '../turns/queue';

export const LOCAL_QUEUE_PATH = '/workflows/v1/local/turn-queue';

export function registerLocalQueueRoute(app: App, enqueue: (message: QueueMessage) => Promise<void>): void {
  app.post(LOCAL_QUEUE_PATH, async (c) => {
    const principal = c.get('principal');
    requireAdmin(principal);
    const body: unknown = await c.req.json().catch(() => undefined);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError('invalid_request', 'the body must be a queue message as a JSON object');
    const given = (body as { tenant?: unknown }).tenant;
    if (given !== undefined && given !== principal.tenant) throw new HttpError('invalid_request', 'tenant must be the key’s own (or left out)', { field: 'tenant' });
    const parsed = QueueMessage.safeParse({ ...body, tenant: principal.tenant });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.join('.') || 'message';
      throw new HttpError('invalid_request', `${field}: ${issue?.message ?? 'invalid'}`, { field });
    }
    await enqueue(parsed.data);
    return c.json({ queued: true }, 202);
  });
}
