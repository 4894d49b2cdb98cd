/**
 * `POST /workflows/v1/workflows/{id}/versions/{n}/migrate {runs | all_paused, dry_run?, limit?, cursor?}`:
 * moves paused runs onto version n (lib/turns/migrate.ts). Admin keys only. Answers per run
 * `migrated` / `would_migrate` (dry run) / `refused` (with the code and reason) / `skipped`.
 * With an Idempotency-Key a retry gets the same answer.
 */
import { createRoute, z } from '@hono/zod-openapi';
import { keys } from '../../store/item-keys';
import type { MigrateResult } from '../../turns/migrate';
import { keyHashOf } from '../../turns/turn-keys';
import { actorOf, idempotencyPrincipal } from '../access';
import type { App, AppDeps } from '../app';
import { requireAdmin } from '../auth';
import { decodeCursor, encodeCursor } from '../cursor';
import { HttpError } from '../errors';
import { ErrorSchema, IDEMPOTENCY_KEY, RUN_ID, WORKFLOW_ID } from '../schemas';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });

/**
 * Runs one request migrates, plans or pages through at most: each is a read and a transaction,
 * so a page fits well inside one invocation (lib/turns/migrate.ts).
 */
export const MAX_MIGRATIONS_PER_CALL = 25;

const MigrateBody = z
  .object({
    runs: z.array(RUN_ID).min(1).max(MAX_MIGRATIONS_PER_CALL).optional().openapi({ description: `The runs to move (at most ${MAX_MIGRATIONS_PER_CALL})` }),
    all_paused: z.literal(true).optional().openapi({ description: 'Every run of the workflow waiting for input, a page at a time' }),
    dry_run: z.boolean().default(false).openapi({ description: 'Say what would happen to each run; change nothing' }),
    limit: z.number().int().min(1).max(MAX_MIGRATIONS_PER_CALL).optional().openapi({ description: `all_paused: runs in this page (default and most: ${MAX_MIGRATIONS_PER_CALL})` }),
    cursor: z.string().max(2048).optional().openapi({ description: 'all_paused: the `next_cursor` of the page before' }),
  })
  .strict();

const Outcome = z.looseObject({
  run_id: z.string(),
  outcome: z.enum(['migrated', 'would_migrate', 'refused', 'skipped']),
  turn_number: z.number().int().optional(),
  code: z.string().optional(),
  reason: z.string().optional(),
  from_version: z.number().int().nullable().optional(),
  component_id: z.string().optional(),
  field: z.string().optional(),
  migration: z.looseObject({ from_version: z.number().int(), to_version: z.number().int(), kept: z.array(z.string()), dropped: z.array(z.looseObject({ component_id: z.string(), reason: z.string() })) }).optional(),
});
const MigrateAnswer = z
  .object({ workflow_id: z.string(), version: z.number().int(), dry_run: z.boolean(), items: z.array(Outcome), next_cursor: z.string().nullable() })
  .openapi('MigrateAnswer', { description: 'Per run: migrated (its migration turn), would_migrate (dry run), refused (code and reason; the run is unchanged) or skipped (already on the version)' });

export function registerMigrationRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/versions/{n}/migrate',
      summary: 'Move paused runs onto version n (each all or nothing; dry_run changes nothing)',
      request: {
        params: z.object({ id: WORKFLOW_ID, n: z.coerce.number().int().min(1) }),
        headers: z.object({ 'idempotency-key': IDEMPOTENCY_KEY.optional() }),
        body: { content: { 'application/json': { schema: MigrateBody } }, required: true },
      },
      responses: {
        200: json(MigrateAnswer, 'what happened to each run'),
        400: json(ErrorSchema, 'invalid request (`field` names it)'),
        403: json(ErrorSchema, 'not an admin key'),
        404: json(ErrorSchema, 'no such workflow or version'),
        422: json(ErrorSchema, 'idempotency_mismatch: the key was used for another request'),
        503: json(ErrorSchema, 'the store failed midway: retry with the same Idempotency-Key'),
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id, n } = c.req.valid('param');
      const body = c.req.valid('json');
      const idempotencyKey = c.req.valid('header')['idempotency-key'];
      if ((body.runs === undefined) === (body.all_paused === undefined)) {
        throw new HttpError('invalid_request', 'runs: name the runs, or send all_paused: true (one of them)', { field: 'runs' });
      }
      if (body.runs && new Set(body.runs).size !== body.runs.length) throw new HttpError('invalid_request', 'runs: a run is named twice', { field: 'runs' });
      for (const field of ['limit', 'cursor'] as const) {
        if (body.runs && body[field] !== undefined) throw new HttpError('invalid_request', `${field}: pages only all_paused`, { field });
      }
      const target = body.runs
        ? { runs: body.runs }
        : {
          allPaused: {
            limit: body.limit ?? MAX_MIGRATIONS_PER_CALL,
            ...(body.cursor ? { cursor: decodeCursor(body.cursor, { attribute: 'gsi1pk', value: keys.sessionList(principal.tenant, id) }) as Record<string, unknown> } : {}),
          },
        };
      // the migration's modules load with its first request, not with every function's init
      const { migrateRuns } = await import('../../turns/migrate');
      const answer = await migrateRuns(deps.engine, {
        tenant: principal.tenant,
        workflowId: id,
        toVersion: n,
        target,
        dryRun: body.dry_run,
        actor: actorOf(principal),
        ...(idempotencyKey ? { keyHash: keyHashOf({ tenant: principal.tenant, principal: `${idempotencyPrincipal(principal)}\nmigrate`, idempotencyKey }) } : {}),
      }, render);
      // the body as first answered (a retry's is the stored one): parsed back, it serializes the same
      return c.json(JSON.parse(answer.body) as z.infer<typeof MigrateAnswer>, 200);
    },
  );
}

function render(result: MigrateResult): string {
  const { next, ...rest } = result;
  return JSON.stringify({ ...rest, next_cursor: encodeCursor(next) });
}
