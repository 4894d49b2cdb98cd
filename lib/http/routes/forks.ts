/**
 * `POST /workflows/v1/workflow-runs/{run_id}/fork {turn_number}`: a new run from the run's state
 * after that turn (lib/turns/forks.ts). Whoever reaches the run may fork it: the fork is theirs
 * as the run is (the same user; a public key gets the fork's own run token in Easel-Run-Token).
 * With an Idempotency-Key a retry answers the same fork (200 instead of 201).
 */
import { createRoute, z } from '@hono/zod-openapi';
import { NotFoundError } from '../../store/errors';
import { forkRun } from '../../turns/forks';
import { keyHashOf } from '../../turns/turn-keys';
import { checkRunRequest, idempotencyPrincipal, runAuthorizer } from '../access';
import type { App, AppDeps } from '../app';
import { RUN_TOKEN_HEADER } from '../auth';
import { HttpError } from '../errors';
import { ErrorSchema, IDEMPOTENCY_KEY, RUN_ID, RunSummarySchema } from '../schemas';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const ForkBody = z.object({ turn_number: z.number().int().min(1) }).strict();

export function registerForkRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflow-runs/{run_id}/fork',
      summary: "A new run from this run's state after a committed turn; the parent is unchanged",
      request: {
        params: z.object({ run_id: RUN_ID }),
        headers: z.object({ 'idempotency-key': IDEMPOTENCY_KEY.optional() }),
        body: { content: { 'application/json': { schema: ForkBody } }, required: true },
      },
      responses: {
        201: json(RunSummarySchema, 'the fork: `forked_from` names the run and turn; its next turn is turn_number + 1'),
        200: json(RunSummarySchema, 'the fork this Idempotency-Key made before'),
        400: json(ErrorSchema, 'invalid request: a turn the run has not committed (`field: turn_number`)'),
        404: json(ErrorSchema, 'no such run'),
        422: json(ErrorSchema, 'idempotency_mismatch: the key made another fork'),
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      const { run_id: runId } = c.req.valid('param');
      const { turn_number: turn } = c.req.valid('json');
      const idempotencyKey = c.req.valid('header')['idempotency-key'];
      checkRunRequest(principal, runId);
      const authorize = runAuthorizer(principal);
      let result;
      try {
        result = await forkRun(deps.engine, {
          tenant: principal.tenant,
          runId,
          turn,
          ...(authorize ? { authorize } : {}),
          ...(idempotencyKey ? { keyHash: keyHashOf({ tenant: principal.tenant, principal: `${idempotencyPrincipal(principal)}\nfork:${runId}`, idempotencyKey }) } : {}),
        });
      } catch (error) {
        if (error instanceof NotFoundError && error.what === 'turn') throw new HttpError('invalid_request', `turn_number: the run has no committed turn ${turn}`, { field: 'turn_number' });
        throw error;
      }
      const headers: Record<string, string> = {};
      if (principal.scope !== 'admin' && deps.access) headers[RUN_TOKEN_HEADER] = await deps.access.runTokens.sign(principal.tenant, result.run.run_id);
      return c.json(result.run, result.replayed ? 200 : 201, headers);
    },
  );
}
