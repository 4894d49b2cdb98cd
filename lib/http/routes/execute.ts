/**
 * POST /workflows/{id}/execute — one turn. JSON by default; with `Accept: text/event-stream`
 * the engine's events stream as they happen and the stream ends with `turn_response` (the
 * committed body) or `turn_error` (nothing above was committed). The turn runs and commits
 * whether or not the client stays.
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { CanvasEvent } from '../../canvas';
import { SsrfGuard, urlRefusal } from '../../outbound/ssrf';
import { executeTurn, newRunId, type TurnRequest, type TurnResult } from '../../turns/execute';
import type { QueueMessage } from '../../turns/queue';
import type { App, AppDeps, HttpLimits } from '../app';
import { derivedRunId, keyHashOf } from '../../turns/turn-keys';
import { actorOf, checkRunRequest, fileAccess, idempotencyPrincipal, newRunUser, runAuthorizer } from '../access';
import { requireWorkflow, RUN_TOKEN_HEADER } from '../auth';
import { errorResponse, HttpError, INTERNAL_ERROR } from '../errors';
import { queueTurn } from '../queued-turns';
import { ErrorSchema, ExecuteBody, IDEMPOTENCY_KEY, TurnResponseSchema, WORKFLOW_ID } from '../schemas';
import { parseOnBusy } from '../../turns/on-busy';
import { feedStream, frame, SSE_HEADERS, startStreamedTurn } from '../sse';

const errorJson = (description: string) => ({ description, content: { 'application/json': { schema: ErrorSchema } } });
const QueuedSchema = z
  .object({ run_id: z.string(), turn_number: z.number().int(), status: z.enum(['running', 'queued']) })
  .openapi('TurnAccepted');

export function registerExecuteRoutes(app: App, deps: AppDeps, limits: HttpLimits): void {
  const guard = deps.guard ?? new SsrfGuard();
  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/execute',
      summary: 'Run one turn: start a run, answer its form, send a query, or stop it',
      request: {
        params: z.object({ id: WORKFLOW_ID }),
        query: z.object({ version: z.coerce.number().int().min(1).optional() }),
        headers: z.object({ 'idempotency-key': IDEMPOTENCY_KEY.optional() }),
        body: { content: { 'application/json': { schema: ExecuteBody } }, required: false },
      },
      responses: {
        200: {
          description: 'the committed turn (JSON), or its events as SSE ending with turn_response / turn_error',
          content: { 'application/json': { schema: TurnResponseSchema }, 'text/event-stream': { schema: z.string() } },
        },
        202: {
          description: '`Prefer: respond-async`, a stop that met an async turn, or an input queued by `on_busy`: `{run_id, turn_number, status: "running" | "queued"}` (the turn in flight, or the turn the queued input becomes)',
          content: { 'application/json': { schema: QueuedSchema } },
        },
        400: errorJson('invalid request'),
        404: errorJson('no such workflow or run'),
        409: errorJson('turn_conflict, turn_in_progress, run_finished, not_waiting_for_input or inbox_full'),
        422: errorJson('invalid_inputs or idempotency_mismatch'),
        429: errorJson('rate_limited: a quota is spent (`limit` names it); retry after `Retry-After` seconds'),
        503: errorJson('unavailable: nothing was committed, retry with the same Idempotency-Key'),
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      const { id } = c.req.valid('param');
      requireWorkflow(principal, id);
      const body = (c.req.valid('json') as z.output<typeof ExecuteBody> | undefined) ?? {};
      const { command, ...runInput } = body.run_input ?? {};
      const idempotencyKey = c.req.valid('header')['idempotency-key'];
      // on a key shared with a public page, a first turn's key is what tells one visitor's run from another's
      if (idempotencyKey && !body.run_id && principal.scope !== 'admin' && !principal.endUser) requireBearerStrength(idempotencyKey);
      if (body.run_id) checkRunRequest(principal, body.run_id);
      // a first turn's run is the caller's own (a keyed retry finds it by its key, a bearer secret)
      const authorize = body.run_id ? runAuthorizer(principal) : undefined;
      const files = fileAccess(principal, deps.access);
      const clientAddress = deps.clientAddress?.(c);
      const request: TurnRequest = {
        tenant: principal.tenant,
        workflowId: id,
        principal: idempotencyPrincipal(principal),
        actor: actorOf(principal),
        ...(clientAddress ? { clientAddress } : {}),
        ...(authorize ? { authorize } : {}),
        ...(files ? { fileAccess: files } : {}),
        ...(body.run_id ? { runId: body.run_id } : { runUserId: newRunUser(principal, runInput.user_id) }),
        ...(body.turn_number !== undefined ? { turnNumber: body.turn_number } : {}),
        ...(c.req.valid('query').version !== undefined ? { version: c.req.valid('query').version } : {}),
        // an end user's runs carry the user the token asserts, whatever user_id was sent
        ...(body.run_input ? { runInput: principal.endUser ? { ...runInput, user_id: principal.endUser.id } : runInput } : {}),
        ...(command ? { command } : {}),
        ...(idempotencyKey ? { idempotencyKey } : {}),
        // against a turn in flight: the body's on_busy, else the workflow's setting (read only then)
        onBusy: body.on_busy !== undefined ? parseOnBusy(body.on_busy) : 'workflow',
        ...(body.callback_url !== undefined ? { callbackUrl: body.callback_url } : {}),
      };
      checkFieldSizes(body.run_input, deps.maxFieldBytes ?? 64 * 1024);
      // a callback the worker could never call is refused now, before anything starts
      if (body.callback_url !== undefined) await checkCallbackUrl(guard, body.callback_url);
      // a public key's new run: its id is fixed now, so its token can go out with the headers
      const tokenHeaders: Record<string, string> = {};
      if (!body.run_id && principal.scope !== 'admin' && deps.access) {
        const runId = idempotencyKey ? derivedRunId(keyHashOf(request)) : (request.newRunId = newRunId());
        tokenHeaders[RUN_TOKEN_HEADER] = await deps.access.runTokens.sign(principal.tenant, runId);
      }
      if (/respond-async/i.test(c.req.header('prefer') ?? '')) {
        return withHeaders(await asyncTurn(deps, request, body.callback_url, limits), tokenHeaders);
      }
      const streaming = (c.req.header('accept') ?? '').includes('text/event-stream');
      if (!streaming) {
        const result = await executeTurn(deps.engine, request);
        return c.body(capped(result.body, limits.maxResponseBytes), 200, { 'content-type': 'application/json', ...tokenHeaders });
      }
      return withHeaders(await streamTurn(deps, request), tokenHeaders);
    },
  );
}

/**
 * `Prefer: respond-async`: the turn is claimed now — so concurrent requests meet it — and runs
 * in a worker that receives the claim with the message. 202 names the turn in flight.
 */
async function asyncTurn(deps: AppDeps, request: TurnRequest, callbackUrl: string | undefined, limits: HttpLimits): Promise<Response> {
  const queued = await queueTurn(deps, request, {
    run_input: queueInput(request),
    ...(request.idempotencyKey ? { idempotency_key: request.idempotencyKey } : {}),
    ...(callbackUrl ? { callback_url: callbackUrl } : {}),
  });
  if ('replay' in queued) return new Response(capped(queued.replay.body, limits.maxResponseBytes), { status: 200, headers: { 'content-type': 'application/json' } });
  const inFlight = 'running' in queued ? queued.running : queued.queued;
  return new Response(JSON.stringify({ run_id: inFlight.runId, turn_number: inFlight.turn, status: 'running' }), {
    status: 202,
    headers: { 'content-type': 'application/json', location: `/workflows/v1/workflow-runs/${inFlight.runId}` },
  });
}

function withHeaders(response: Response, headers: Record<string, string>): Response {
  for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
  return response;
}

/** The run input as a queue message carries it (JSON only: no nulls, no signal). */
function queueInput(request: TurnRequest): QueueMessage['run_input'] {
  const i = request.runInput ?? {};
  return {
    ...(i.query ? { query: i.query } : {}),
    ...(i.inputs ? { inputs: i.inputs } : {}),
    ...(i.files ? { files: i.files } : {}),
    ...(i.user_id ? { user_id: i.user_id } : {}),
    ...(request.command ? { command: request.command } : {}),
  };
}

/** The least a first turn's Idempotency-Key must carry on an execute key: it is a bearer secret there. */
export const MIN_BEARER_KEY_BITS = 128;

/**
 * An estimate of the randomness in a key: its length times the bits of the alphabet it draws
 * from (digits, lower case, upper case, `_.:-`), and at least 10 distinct characters. A UUID v4
 * or 32 random hex characters pass; `retry-1` does not.
 */
export function bearerKeyBits(key: string): number {
  if (new Set(key).size < 10) return 0;
  // hex, with or without a UUID's dashes: 4 bits a digit
  if (/^[0-9a-f-]+$/.test(key) || /^[0-9A-F-]+$/.test(key)) return key.replace(/-/g, '').length * 4;
  const classes: [RegExp, number][] = [[/[0-9]/, 10], [/[a-z]/, 26], [/[A-Z]/, 26], [/[_.:-]/, 4]];
  const alphabet = classes.reduce((n, [re, size]) => n + (re.test(key) ? size : 0), 0);
  return Math.floor(key.length * Math.log2(alphabet));
}

function requireBearerStrength(key: string): void {
  const bits = bearerKeyBits(key);
  if (bits < MIN_BEARER_KEY_BITS) {
    throw new HttpError(
      'invalid_request',
      `Idempotency-Key: a first turn sent with an execute key needs a key of at least ${MIN_BEARER_KEY_BITS} random bits (e.g. a UUID v4 or 32 random hex characters); this one carries about ${bits}`,
      { field: 'Idempotency-Key' },
    );
  }
}

/** 400 `invalid_request` naming `callback_url` when the SSRF guard refuses it. */
async function checkCallbackUrl(guard: SsrfGuard, url: string): Promise<void> {
  const refusal = await urlRefusal(guard, url);
  if (refusal) throw new HttpError('invalid_request', `callback_url: ${refusal}`, { field: 'callback_url' });
}

/** No single form value or query may be larger than `max` bytes. */
export function checkFieldSizes(runInput: { query?: string; inputs?: Record<string, unknown> } | undefined, max: number): void {
  const check = (field: string, value: unknown) => {
    const size = Buffer.byteLength(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
    if (size > max) throw new HttpError('payload_too_large', `${field} is ${size} bytes; at most ${max} are accepted`, { field });
  };
  if (runInput?.query !== undefined) check('run_input.query', runInput.query);
  for (const [name, value] of Object.entries(runInput?.inputs ?? {})) check(`run_input.inputs.${name}`, value);
}

/** Responses over the cap keep everything but the events, which the turn record holds. */
export function capped(body: string, maxBytes: number): string {
  if (Buffer.byteLength(body) <= maxBytes) return body;
  const parsed = JSON.parse(body) as Record<string, unknown>;
  return JSON.stringify({ ...parsed, events: [], events_truncated: true });
}

/**
 * Headers wait for the first event, so a turn refused before it starts (404, 409, 422) gets a
 * plain error status; once events flow, the outcome comes in the last frame.
 */
async function streamTurn(deps: AppDeps, request: TurnRequest): Promise<Response> {
  const sse = feedStream();
  const { turn } = await startStreamedTurn((started) =>
    executeTurn(deps.engine, {
      ...request,
      onEvent(event: CanvasEvent) {
        started();
        sse.write(frame(event.event, event.data));
      },
    }),
  );
  void turn.then(
    (result: TurnResult) => {
      // a replayed turn streams its stored events
      if (result.replayed) for (const e of result.response.events) sse.write(frame(e.event, e.data));
      sse.write(frame('turn_response', result.body));
      sse.close();
    },
    (error: unknown) => {
      const mapped = errorResponse(error);
      if (!mapped) deps.logger?.error('turn failed', { error: error instanceof Error ? error.message : String(error) });
      const body = mapped?.body ?? INTERNAL_ERROR;
      sse.write(frame('turn_error', { code: body.code, error: body.error, current_turn_number: body.current_turn_number ?? null }));
      sse.close();
    },
  );
  return new Response(sse.stream, { status: 200, headers: SSE_HEADERS });
}
