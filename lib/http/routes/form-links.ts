/**
 * Form links (lib/http/form-links.ts): answering a pause without an API key.
 *
 *   POST /workflows/v1/workflow-runs/{run_id}/form-links   admin key, or the run's own token:
 *        a link to the run's pending form, `{url, token, link_id, turn_number, expires_at}`
 *   GET  /workflows/v1/form-link    (Easel-Form-Token)     the form the link answers
 *   POST /workflows/v1/form-link    (Easel-Form-Token)     the answer: the run's next turn
 *
 * The two public routes are mounted before API keys are asked for. A token that is not ours, a
 * tampered one, or one whose run is gone is "not found"; an expired one `form_link_expired`;
 * one whose form was answered (through the link or any other way) `form_link_used`. The answer's
 * turn record names the link as its actor (`form_link`, the link id).
 */
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { EaselError } from '../../errors';
import { NotFoundError } from '../../store/errors';
import { executeTurn } from '../../turns/execute';
import { describeRun, type RunSummary } from '../../turns/runs';
import { checkRunRequest, mayReachRun } from '../access';
import type { App, AppDeps, AppEnv } from '../app';
import { HttpError, validationHook } from '../errors';
import { DEFAULT_LINK_SECONDS, FORM_TOKEN_HEADER, type FormLink, MAX_LINK_SECONDS, MIN_LINK_SECONDS, pauseLink, readFormLink } from '../../turns/form-links';
import { ErrorSchema } from '../schemas';
import { checkFieldSizes } from './execute';

export const FORM_LINK_PATH = '/workflows/v1/form-link';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = {
  400: json(ErrorSchema, 'invalid request (the field is named)'),
  404: json(ErrorSchema, 'no such run, or no such form link'),
  409: json(ErrorSchema, 'not_waiting_for_input (making a link)'),
  410: json(ErrorSchema, 'form_link_expired, form_link_used'),
};

const RunParam = z.object({ run_id: z.string().regex(/^[0-9a-f]{32}$/) });
const CreateBody = z
  .object({ expires_in_seconds: z.number().int().min(MIN_LINK_SECONDS).max(MAX_LINK_SECONDS).optional() })
  .strict();
const LinkSchema = z.object({
  url: z.string(),
  token: z.string(),
  link_id: z.string(),
  run_id: z.string(),
  turn_number: z.number().int(),
  expires_at: z.string(),
});
const FormSchema = z.object({ link_id: z.string(), tips: z.string(), inputs: z.record(z.string(), z.unknown()), turn_number: z.number().int(), expires_at: z.string() });
const AnswerBody = z.object({ inputs: z.record(z.string(), z.unknown()) }).strict();
const AnsweredSchema = z.object({ answered: z.literal(true), status: z.string(), turn_number: z.number().int() });
/** What a turn on the link's turn meets once someone else answered (or is answering) its form. */
const ANSWERED: ReadonlySet<string> = new Set(['turn_conflict', 'turn_in_progress', 'not_waiting_for_input', 'run_finished']);
const TokenHeader = z.object({ [FORM_TOKEN_HEADER]: z.string().min(1).max(2048) });

/** The link the request's token grants, unexpired; refused otherwise. */
async function linkOf(c: Context, deps: AppDeps): Promise<FormLink> {
  const token = c.req.header(FORM_TOKEN_HEADER) ?? '';
  const link = deps.access ? await readFormLink(deps.access.formTokens, token) : null;
  if (!link) throw new NotFoundError('form link');
  const now = (deps.engine.clock ?? Date.now)();
  if (link.expiresAt * 1000 <= now) throw new HttpError('form_link_expired', `this form link expired at ${new Date(link.expiresAt * 1000).toISOString()}; ask for a new one`);
  return link;
}

/** The run the link names, still at the link's pause; a run of another workflow is not found. */
async function pendingRun(deps: AppDeps, link: FormLink): Promise<RunSummary> {
  const run = await describeRun(deps.engine, link.tenant, link.runId);
  if (run.workflow_id !== link.workflowId) throw new NotFoundError('form link');
  if (run.turn_number !== link.turn || run.status !== 'waiting_for_input' || !run.next_input_hint) {
    throw new HttpError('form_link_used', 'the form of this link was answered already');
  }
  return run;
}

/** The link routes behind API keys. */
export function registerFormLinkRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflow-runs/{run_id}/form-links',
      summary: "A link that answers the run's pending form without a key (admin, or the run's token)",
      request: { params: RunParam, body: { content: { 'application/json': { schema: CreateBody } }, required: false } },
      responses: { 201: json(LinkSchema, 'the link; the same pause and lifetime give the same link'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      const { run_id: runId } = c.req.valid('param');
      const body = (c.req.valid('json') as z.output<typeof CreateBody> | undefined) ?? {};
      checkRunRequest(principal, runId);
      const run = await describeRun(deps.engine, principal.tenant, runId);
      if (!mayReachRun(principal, { id: run.run_id, workflowId: run.workflow_id, userId: run.user_id })) throw new NotFoundError('run');
      if (!deps.access) throw new HttpError('unavailable', 'form links need the server keys, which this server was started without');
      if (run.status !== 'waiting_for_input' || !run.next_input_hint) {
        throw new HttpError('not_waiting_for_input', `the run is ${run.status}, not waiting for an answer`, { status: run.status });
      }
      const file = Object.entries(run.next_input_hint.inputs).find(([, f]) => f.type === 'file');
      if (file) throw new HttpError('invalid_request', `the form has a file field ("${file[0]}"), and uploads need a key: answer it through the API`, { field: `inputs.${file[0]}` });
      const seconds = body.expires_in_seconds ?? DEFAULT_LINK_SECONDS;
      // counted from the pause, so a retried request gets the same link
      const link = await pauseLink(deps.access.formTokens, { tenant: principal.tenant, workflowId: run.workflow_id, runId, turn: run.turn_number, pausedAt: run.updated_at, seconds }, deps.formBaseUrl ?? deps.publicUrl);
      if (Date.parse(link.expires_at) <= (deps.engine.clock ?? Date.now)()) {
        throw new HttpError('invalid_request', `the run has waited longer than ${seconds} seconds: ask for a longer lifetime`, { field: 'expires_in_seconds' });
      }
      return c.json(link, 201);
    },
  );
}

/** The routes a link's holder calls: no key. */
export function formLinkRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.openapi(
    createRoute({
      method: 'get',
      path: FORM_LINK_PATH,
      summary: 'The form a form link answers (no key: the link token in Easel-Form-Token)',
      request: { headers: TokenHeader },
      responses: { 200: json(FormSchema, 'the pending form'), ...errors },
    }),
    async (c) => {
      const link = await linkOf(c, deps);
      const run = await pendingRun(deps, link);
      const hint = run.next_input_hint!;
      return c.json({ link_id: link.linkId, tips: hint.tips, inputs: hint.inputs, turn_number: link.turn, expires_at: new Date(link.expiresAt * 1000).toISOString() }, 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'post',
      path: FORM_LINK_PATH,
      summary: "Answer a form link's form: the run's next turn (no key: the link token in Easel-Form-Token)",
      request: { headers: TokenHeader, body: { content: { 'application/json': { schema: AnswerBody } }, required: true } },
      responses: { 200: json(AnsweredSchema, 'answered'), 422: json(ErrorSchema, 'invalid_inputs, naming the fields'), ...errors },
    }),
    async (c) => {
      const link = await linkOf(c, deps);
      const { inputs } = c.req.valid('json');
      checkFieldSizes({ inputs }, deps.maxFieldBytes ?? 64 * 1024);
      try {
        const { response } = await executeTurn(deps.engine, {
          tenant: link.tenant,
          workflowId: link.workflowId,
          runId: link.runId,
          turnNumber: link.turn,
          principal: `form-link:${link.linkId}`,
          actor: { kind: 'form_link', id: link.linkId },
          runInput: { inputs },
        });
        return c.json({ answered: true as const, status: response.status, turn_number: response.turn_number }, 200);
      } catch (error) {
        // whoever answered first, this link's turn is gone: the same answer for every way it went
        // (an answer still being run counts: the form is taken)
        if (error instanceof EaselError && ANSWERED.has(error.code)) throw new HttpError('form_link_used', 'the form of this link was answered already');
        throw error;
      }
    },
  );
  return app;
}
