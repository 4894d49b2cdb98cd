/**
 * Replays of recorded runs against a workflow version (lib/turns/replay.ts), admin keys only —
 * a replay reads and reports on many runs, whoever's they are, which no execute key may:
 *
 *   POST .../workflows/{id}/replays {version, runs: [ids] | {sample, since?}, on_differ?, page_size?}
 *     202 the replay, queued for the worker; with an Idempotency-Key a retry answers it (200)
 *   GET  .../workflows/{id}/replays/{replay_id}           its progress and what it found so far
 *   GET  .../workflows/{id}/replays/{replay_id}/results   each run's result, a page at a time
 *
 * Another tenant's workflow or replay answers as a missing one (404).
 */
import { createRoute, z } from '@hono/zod-openapi';
import { NotFoundError } from '../../store/errors';
import { getWorkflow } from '../../store/workflows';
import { MAX_REPLAY_PAGE_SIZE, MAX_REPLAY_RUNS, readReplay, readReplayResults, ReplayRequestError, startReplay } from '../../turns/replay';
import { keyHashOf } from '../../turns/turn-keys';
import { idempotencyPrincipal } from '../access';
import type { App, AppDeps } from '../app';
import { requireAdmin } from '../auth';
import { HttpError } from '../errors';
import { ErrorSchema, IDEMPOTENCY_KEY, RUN_ID, WORKFLOW_ID } from '../schemas';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const REPLAY_ID = z.string().regex(/^[0-9a-f]{32}$/, '32 lowercase hex characters');

const ReplayBody = z
  .object({
    version: z.number().int().min(1).openapi({ description: 'The version the runs are replayed against' }),
    runs: z
      .union([
        z.array(RUN_ID).min(1).max(MAX_REPLAY_RUNS),
        z.object({
          sample: z.number().int().min(1).max(MAX_REPLAY_RUNS),
          since: z.iso.datetime({ offset: true }).optional().openapi({ description: 'Runs started at or after this time (ISO 8601); absent: any' }),
        }).strict(),
      ])
      .openapi({ description: 'The runs of this workflow to replay (ids), or `{sample, since?}`: that many of its runs started since then, drawn at random' }),
    on_differ: z.enum(['live', 'refuse']).default('live').openapi({ description: 'A call that differs from its record: made live (`live`), or the run\u2019s replay stops there (`refuse`)' }),
    page_size: z.number().int().min(1).max(MAX_REPLAY_PAGE_SIZE).optional().openapi({ description: 'Runs per page of work (one queue message each); default 5' }),
  })
  .strict()
  .openapi('StartReplay');

const ReplaySchema = z
  .looseObject({
    replay_id: z.string(),
    workflow_id: z.string(),
    version: z.number().int(),
    on_differ: z.enum(['live', 'refuse']),
    status: z.enum(['queued', 'running', 'done']),
    runs_total: z.number().int(),
    runs_done: z.number().int(),
    pages_total: z.number().int(),
    pages_done: z.number().int(),
    created_at: z.string(),
    expires_at: z.string(),
    summary: z.looseObject({
      outcomes: z.record(z.string(), z.number().int()),
      calls: z.object({ recorded: z.number().int(), answered: z.number().int(), live: z.number().int() }),
      runs: z.array(z.looseObject({ run_id: z.string(), outcome: z.string(), components: z.array(z.string()) })),
    }),
  })
  .openapi('Replay', { description: 'A replay: its progress, and a summary of what it found so far (the runs that did not behave the same, with their components)' });

const ReplayResults = z
  .object({ items: z.array(z.looseObject({ run_id: z.string(), outcome: z.string() })), next_cursor: z.string().nullable() })
  .openapi('ReplayResults', { description: 'Each run\u2019s result: outcome, first_divergence, components, live_calls, calls' });

const Params = z.object({ id: WORKFLOW_ID, replay_id: REPLAY_ID });

export function registerReplayRoutes(app: App, deps: AppDeps): void {
  const { engine } = deps;
  const live = async (tenant: string, id: string) => {
    const w = await getWorkflow(engine.store, tenant, id);
    if (w.deleted) throw new NotFoundError('workflow');
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/replays',
      summary: 'Replay recorded runs against a version: the worker runs them in pages; nothing is written into the runs',
      request: {
        params: z.object({ id: WORKFLOW_ID }),
        headers: z.object({ 'idempotency-key': IDEMPOTENCY_KEY.optional() }),
        body: { content: { 'application/json': { schema: ReplayBody } }, required: true },
      },
      responses: {
        202: json(ReplaySchema, 'queued; `Location` is its progress'),
        200: json(ReplaySchema, 'the replay this Idempotency-Key started before'),
        400: json(ErrorSchema, 'invalid request: a version the workflow does not have (`field: version`), runs that are not this workflow\u2019s (`field: runs`, `unknown_run_ids`)'),
        403: json(ErrorSchema, 'not an admin key'),
        404: json(ErrorSchema, 'no such workflow'),
        422: json(ErrorSchema, 'idempotency_mismatch: the key started another replay'),
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      const idempotencyKey = c.req.valid('header')['idempotency-key'];
      const enqueue = deps.enqueue;
      if (!enqueue) throw new HttpError('unavailable', 'replays need the turn queue, which is not configured here');
      await live(principal.tenant, id);
      let started;
      try {
        started = await startReplay(engine, {
          tenant: principal.tenant,
          workflowId: id,
          version: body.version,
          runs: Array.isArray(body.runs) ? body.runs : { sample: body.runs.sample, ...(body.runs.since ? { since: body.runs.since } : {}) },
          onDiffer: body.on_differ,
          ...(body.page_size ? { pageSize: body.page_size } : {}),
          ...(idempotencyKey ? { keyHash: keyHashOf({ tenant: principal.tenant, principal: `${idempotencyPrincipal(principal)}\nreplay:${id}`, idempotencyKey }) } : {}),
          enqueue,
        });
      } catch (error) {
        if (!(error instanceof ReplayRequestError)) throw error;
        throw new HttpError('invalid_request', error.message, { field: error.field, ...(error.field === 'runs' ? { unknown_run_ids: error.unknownRunIds } : {}) });
      }
      c.header('location', `/workflows/v1/workflows/${id}/replays/${started.view.replay_id}`);
      return c.json(started.view, started.existing ? 200 : 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflows/{id}/replays/{replay_id}',
      summary: 'A replay: its progress (runs and pages done) and what it found so far',
      request: { params: Params },
      responses: { 200: json(ReplaySchema, 'the replay'), 403: json(ErrorSchema, 'not an admin key'), 404: json(ErrorSchema, 'no such workflow or replay (or it expired)') },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id, replay_id: replayId } = c.req.valid('param');
      await live(principal.tenant, id);
      return c.json(await readReplay(engine, principal.tenant, id, replayId), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflows/{id}/replays/{replay_id}/results',
      summary: 'The result of each run a replay has done, one page of runs at a time',
      request: { params: Params, query: z.object({ cursor: z.string().regex(/^\d{1,6}$/, 'a cursor from next_cursor').optional() }) },
      responses: { 200: json(ReplayResults, 'results'), 400: json(ErrorSchema, 'a bad cursor'), 403: json(ErrorSchema, 'not an admin key'), 404: json(ErrorSchema, 'no such workflow or replay') },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id, replay_id: replayId } = c.req.valid('param');
      const { cursor } = c.req.valid('query');
      await live(principal.tenant, id);
      const { items, next } = await readReplayResults(engine, principal.tenant, id, replayId, cursor === undefined ? 0 : Number(cursor));
      return c.json({ items, next_cursor: next === null ? null : String(next) }, 200);
    },
  );
}
