/**
 * `POST /workflows/v1/local/turn-queue`, served by `npm start` only: puts a message on the
 * in-process turn queue, as a scheduler or another application would send it to the SQS queue
 * on AWS. The worker gets it as an SQS record, like any other. It sits behind the API's own
 * middleware (key, body limit, JSON checks, errors); it needs an admin key, and the tenant is
 * the key's. It answers 202 with the run the message will run in (`run_id`; null for a first
 * turn without an idempotency key, whose id the worker makes).
 */
import type { App } from '../http/app';
import { requireAdmin } from '../http/auth';
import { HttpError } from '../http/errors';
import { QueueMessage } from '../turns/queue';
import { derivedRunId, keyHashOf } from '../turns/turn-keys';

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
    const message = parsed.data;
    await enqueue(message);
    // the run the worker will use: the message's, or a keyed first turn's (derived from its key,
    // as the worker derives it); a first turn without a key gets its id when the worker runs it
    const runId = message.run_id ?? (message.idempotency_key ? derivedRunId(keyHashOf({ tenant: message.tenant, idempotencyKey: message.idempotency_key })) : null);
    return c.json({ queued: true, run_id: runId, ...(runId ? {} : { note: 'a first turn without idempotency_key gets its run id when the worker runs it; send one to know the id now' }) }, 202);
  });
}
