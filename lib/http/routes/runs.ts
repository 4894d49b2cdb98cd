/** Runs (sessions): listing, reading, their committed turns (also replayed as SSE), deletion. */
import { createRoute, z } from '@hono/zod-openapi';
import { RUN_STATUSES } from '../../canvas';
import { NotFoundError } from '../../store/errors';
import { keys } from '../../store/item-keys';
import { listSessions } from '../../store/session-listing';
import { deleteRun, describeRun, runTurn, runTurns } from '../../turns/runs';
import { parseCursor, readTurnEvents, type TurnEvents } from '../../turns/progress';
import { fireTimer } from '../../turns/timers';
import type { App, AppDeps } from '../app';
import { checkRunRequest, mayReachRun, runListing } from '../access';
import { requireAdmin, requireWorkflow } from '../auth';
import { decodeCursor, encodeCursor } from '../cursor';
import { errorResponse, HttpError, INTERNAL_ERROR } from '../errors';
import { ErrorSchema, Limit, Page, RUN_ID, RunSummarySchema, WORKFLOW_ID } from '../schemas';
import { frame, SSE_HEADERS } from '../sse';

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = { 400: json(ErrorSchema, 'invalid request'), 404: json(ErrorSchema, 'not found') };
const RunParam = z.object({ run_id: RUN_ID });

const TurnItem = z
  .object({
    turn_number: z.number().int(),
    status: z.string(),
    created_at: z.string(),
    request: z.unknown(),
    response: z.unknown(),
    calls: z
      .object({ records: z.array(z.unknown()), dropped: z.number().int() })
      .optional()
      .describe('GET of one turn: every call it made outside the run (model, tool, Invoke) in order, and how many went unrecorded past the bound'),
  })
  .openapi('Turn');

const TurnEventsSchema = z
  .object({
    turn_number: z.number().int(),
    status: z.string(),
    committed: z.boolean(),
    events: z.array(z.unknown()),
    next_cursor: z.string(),
    response: z.unknown().optional(),
  })
  .openapi('TurnEvents');

/** How often an SSE follower looks for new checkpoints, and how long one stream lasts by default. */
const FOLLOW_POLL_MS = 500;
const FOLLOW_MAX_MS = 10 * 60_000;

/**
 * The SSE stream of a followed turn: each event with its cursor as `id`, then `turn_response`
 * (the committed body) once the turn commits. A stream that reaches its time limit just ends;
 * the client reconnects with Last-Event-ID and goes on from there.
 */
function followTurn(first: TurnEvents, more: (cursor: string) => Promise<TurnEvents>, maxMs: number, logger?: AppDeps['logger']): ReadableStream<Uint8Array> {
  const deadline = Date.now() + maxMs;
  let page: TurnEvents | null = first;
  let cursor = first.next_cursor;
  let gone = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        while (!page) {
          if (gone) return;
          if (Date.now() > deadline) return controller.close();
          await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
          const next = await more(cursor);
          if (next.events.length > 0 || next.committed) page = next;
        }
        const current: TurnEvents = page;
        page = null;
        (current.events as { event: string; data: unknown }[]).forEach((e, k) => controller.enqueue(frame(e.event, e.data, current.cursors[k])));
        cursor = current.next_cursor;
        if (current.committed) {
          controller.enqueue(frame('turn_response', current.response ?? '{}', current.next_cursor));
          controller.close();
        }
      } catch (error) {
        if (gone) return;
        const mapped = errorResponse(error);
        if (!mapped) logger?.error('following a turn failed', { error: error instanceof Error ? error.message : String(error) });
        controller.enqueue(frame('follow_error', mapped?.body ?? INTERNAL_ERROR));
        controller.close();
      }
    },
    cancel() {
      // the client left: stop polling the store for it
      gone = true;
    },
  });
}

export function registerRunRoutes(app: App, deps: AppDeps): void {
  const { engine } = deps;
  /** The run, if the key may see it: another tenant's or another workflow's run is "not found". */
  const visibleRun = async (c: { get(k: 'principal'): import('../auth').Principal }, runId: string) => {
    const principal = c.get('principal');
    // a bare execute key reaches no run: refused before anything is read
    checkRunRequest(principal, runId);
    const run = await describeRun(engine, principal.tenant, runId);
    // answered exactly as a missing run: the key learns nothing about runs that are not its own
    if (!mayReachRun(principal, { id: run.run_id, workflowId: run.workflow_id, userId: run.user_id })) throw new NotFoundError('run');
    return run;
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflow-runs',
      summary: 'Runs of a workflow, newest first',
      request: {
        query: z.object({
          workflow_id: WORKFLOW_ID,
          status: z.enum([...RUN_STATUSES, 'started', 'paused']).optional(),
          user_id: z.string().max(256).optional(),
          limit: Limit,
          cursor: z.string().max(2048).optional(),
        }),
      },
      responses: { 200: json(Page(RunSummarySchema), 'runs'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      const q = c.req.valid('query');
      requireWorkflow(principal, q.workflow_id);
      const scope = runListing(principal, q.user_id);
      // `started` and `paused` are accepted as filters and never produced
      if (q.status === 'started' || q.status === 'paused') return c.json({ items: [], next_cursor: null }, 200);
      const listing = keys.sessionList(principal.tenant, q.workflow_id);
      const page = await listSessions(engine.store, principal.tenant, q.workflow_id, {
        limit: q.limit,
        cursor: decodeCursor(q.cursor, { attribute: 'gsi1pk', value: listing }),
        ...scope,
        ...(q.status !== undefined ? { status: q.status } : {}),
      });
      return c.json({
        items: page.items.map((s) => ({
          run_id: s.id,
          workflow_id: s.workflowId,
          version: s.version,
          status: s.status,
          turn_number: s.turn,
          user_id: s.userId,
          created_at: s.createdAt,
          updated_at: s.updatedAt,
        })),
        next_cursor: encodeCursor(page.cursor),
      }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/workflows/v1/workflow-runs/{run_id}', summary: 'A run: status, current turn, what it waits for', request: { params: RunParam }, responses: { 200: json(RunSummarySchema, 'the run'), ...errors } }),
    async (c) => c.json(await visibleRun(c, c.req.valid('param').run_id), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflow-runs/{run_id}/turns',
      summary: 'Committed turns, oldest first',
      request: { params: RunParam, query: z.object({ limit: Limit, cursor: z.string().regex(/^\d{1,8}$/).optional() }) },
      responses: { 200: json(Page(TurnItem), 'turns'), ...errors },
    }),
    async (c) => {
      const { run_id } = c.req.valid('param');
      const { limit, cursor } = c.req.valid('query');
      await visibleRun(c, run_id);
      const after = cursor ? Number(cursor) : 0;
      const { items, more } = await runTurns(engine, c.get('principal').tenant, run_id, after, limit);
      return c.json({
        items: items.map((t) => ({ ...t, response: JSON.parse(t.response) as unknown })),
        next_cursor: more && items.length > 0 ? String(items.at(-1)?.turn_number) : null,
      }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflow-runs/{run_id}/turns/{n}',
      summary: 'One committed turn; `?format=sse` replays its events as SSE',
      request: { params: RunParam.extend({ n: z.coerce.number().int().min(1) }), query: z.object({ format: z.enum(['json', 'sse']).default('json') }) },
      responses: { 200: { description: 'the turn', content: { 'application/json': { schema: TurnItem }, 'text/event-stream': { schema: z.string() } } }, ...errors },
    }),
    async (c) => {
      const { run_id, n } = c.req.valid('param');
      await visibleRun(c, run_id);
      const turn = await runTurn(engine, c.get('principal').tenant, run_id, n);
      if (!turn) throw new HttpError('not_found', 'turn not found');
      if (c.req.valid('query').format === 'sse') {
        const response = JSON.parse(turn.response) as { events: { event: string; data: unknown }[] };
        const frames = [...response.events.map((e) => frame(e.event, e.data)), frame('turn_response', turn.response)];
        return new Response(new Blob(frames), { status: 200, headers: SSE_HEADERS });
      }
      return c.json({ ...turn, response: JSON.parse(turn.response) as unknown }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflow-runs/{run_id}/turns/{n}/events',
      summary: 'Follow a turn from a cursor: an async turn’s events as its checkpoints store them, then the committed rest; `?format=sse` streams until the commit',
      request: {
        params: RunParam.extend({ n: z.coerce.number().int().min(1) }),
        query: z.object({ cursor: z.string().max(20).optional(), format: z.enum(['json', 'sse']).default('json') }),
      },
      responses: {
        200: { description: 'events after the cursor', content: { 'application/json': { schema: TurnEventsSchema }, 'text/event-stream': { schema: z.string() } } },
        ...errors,
      },
    }),
    async (c) => {
      const { run_id, n } = c.req.valid('param');
      await visibleRun(c, run_id);
      const tenant = c.get('principal').tenant;
      const { format } = c.req.valid('query');
      const cursor = parseCursor(c.req.valid('query').cursor ?? c.req.header('last-event-id'));
      const first = await readTurnEvents(engine, tenant, run_id, n, cursor);
      if (format === 'json') {
        const { response, cursors: _perEvent, ...rest } = first;
        return c.json({ ...rest, ...(response !== undefined ? { response: JSON.parse(response) as unknown } : {}) }, 200);
      }
      const more = (from: string) => readTurnEvents(engine, tenant, run_id, n, parseCursor(from));
      return new Response(followTurn(first, more, deps.followMaxMs ?? FOLLOW_MAX_MS, deps.logger), { status: 200, headers: SSE_HEADERS });
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/runs/{run_id}/pump-companions',
      summary: 'Advance the run’s background work now: fire its armed form timer; answers the turn',
      request: { params: RunParam.extend({ id: WORKFLOW_ID }) },
      responses: { 200: json(z.looseObject({ run_id: z.string(), status: z.string(), turn_number: z.number().int() }), 'the timer turn'), ...errors, 409: json(ErrorSchema, 'no_timer_armed (the run has no form timer armed; `status` is the run status), turn_in_progress or turn_conflict') },
    }),
    async (c) => {
      const { id, run_id } = c.req.valid('param');
      const run = await visibleRun(c, run_id);
      if (run.workflow_id !== id) throw new HttpError('not_found', 'run not found');
      const result = await fireTimer(engine, c.get('principal').tenant, run_id);
      return c.json(result.response as unknown as { run_id: string; status: string; turn_number: number }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/workflows/v1/workflow-runs/{run_id}', summary: 'Delete a run and all it stored', request: { params: RunParam }, responses: { 204: { description: 'deleted' }, ...errors } }),
    async (c) => {
      // execute keys read and run; deleting is for admin keys
      requireAdmin(c.get('principal'));
      const { run_id } = c.req.valid('param');
      await visibleRun(c, run_id);
      await deleteRun(engine, c.get('principal').tenant, run_id);
      return c.body(null, 204);
    },
  );
}
