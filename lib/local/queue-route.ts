/**
 * `POST /local/turn-queue`, served by `npm start` only: puts a message on the in-process turn
 * queue, as a scheduler or another application would send it to the SQS queue on AWS. The
 * worker gets it as an SQS record, like any other. An admin key; the tenant is the key's.
 */
import { type Authenticator, requireAdmin } from '../http/auth';
import { errorResponse, HttpError, INTERNAL_ERROR } from '../http/errors';
import { QueueMessage } from '../turns/queue';

type Fetch = (request: Request, ...rest: never[]) => Response | Promise<Response>;

export const LOCAL_QUEUE_PATH = '/local/turn-queue';
const MAX_MESSAGE_BYTES = 256 * 1024; // SQS's own limit

export function withLocalQueue<F extends Fetch>(fetch: F, auth: Authenticator, enqueue: (message: QueueMessage) => Promise<void>): F {
  return (async (request: Request, ...rest: never[]) => {
    if (new URL(request.url).pathname !== LOCAL_QUEUE_PATH) return fetch(request, ...rest);
    try {
      if (request.method !== 'POST') throw new HttpError('invalid_request', `${LOCAL_QUEUE_PATH} takes POST`);
      const principal = await auth.authenticate(request.headers.get('authorization') ?? undefined);
      requireAdmin(principal);
      const text = await request.text();
      if (Buffer.byteLength(text) > MAX_MESSAGE_BYTES) throw new HttpError('payload_too_large', `a queue message is at most ${MAX_MESSAGE_BYTES} bytes`);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new HttpError('invalid_request', 'the body must be a queue message as JSON');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError('invalid_request', 'the body must be a JSON object');
      const given = (body as { tenant?: unknown }).tenant;
      if (given !== undefined && given !== principal.tenant) throw new HttpError('invalid_request', 'tenant must be the key’s own (or left out)', { field: 'tenant' });
      const parsed = QueueMessage.safeParse({ ...body, tenant: principal.tenant });
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field = issue?.path.join('.') || 'message';
        throw new HttpError('invalid_request', `${field}: ${issue?.message ?? 'invalid'}`, { field });
      }
      await enqueue(parsed.data);
      return Response.json({ queued: true }, { status: 202 });
    } catch (error) {
      const mapped = errorResponse(error);
      return Response.json(mapped?.body ?? INTERNAL_ERROR, { status: mapped?.status ?? 500 });
    }
  }) as F;
}
