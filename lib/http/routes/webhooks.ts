/**
 * Deliveries into workflows whose Begin is in webhook mode (lib/components/begin.ts):
 *
 *   POST|GET|PUT|PATCH|DELETE|HEAD /workflows/v1/webhooks/{webhook_id}   the workflow's own URL
 *   POST|GET|PUT|PATCH|DELETE|HEAD /api/v1/agents/{agent_id}/webhook     RAGFlow's path
 *
 * No API key: a delivery authenticates with what Begin's `security` says (a token header,
 * Basic, a JWT, or nothing with `allow_anonymous`), checked by lib/webhooks/delivery.ts. The
 * webhook id is opaque (it names neither tenant nor workflow: store/webhooks.ts); RAGFlow's path
 * names the workflow, whose id is unique across tenants. A sub-app mounted by createApp before
 * the API-key middleware of /workflows/v1/* and /api/v1/*, so that neither applies.
 *
 * The run belongs to the tenant (no run user: admin keys alone reach it), its turns name the
 * webhook as their actor, and it starts with RAGFlow's Begin rules. `Idempotency-Key`, or a
 * sender's delivery id (DELIVERY_ID_HEADERS), makes a redelivery replay the first answer and
 * run nothing. Answers (lib/webhooks/answer.ts): `Immediately` is Accepted — 202 at once, the
 * run on the turn queue; `Streaming` is Final — the run's result once it ends. Errors are the
 * native `{code, error, ...}` on both paths.
 */
import { OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { entryPrologue, type Workflow } from '../../canvas';
import { WEBHOOK_METHODS, type WebhookConfig } from '../../components/webhook-params';
import { NotFoundError } from '../../store/errors';
import { ensureWebhook, getWebhook, type Webhook, WEBHOOK_ID, webhookOfWorkflow } from '../../store/webhooks';
import type { Workflow as StoredWorkflow } from '../../store/workflows';
import { compiledVersion, executeTurn, type TurnRequest } from '../../turns/execute';
import { resolveWorkflow } from '../../turns/compiled';
import { acceptedAnswer, finalAnswer, type WebhookAnswer, WorkflowFailedError } from '../../webhooks/answer';
import { WebhookCredentials } from '../../webhooks/credentials';
import { authenticate, bodyLimitOf, checkAddress, checkMethod, type Delivery, DeliveryRefused, deliveryKey, parsePayload, takeDelivery, webhookEntry } from '../../webhooks/delivery';
import { webhookRun } from '../access';
import type { AppDeps, AppEnv } from '../app';
import { HttpError, validationHook } from '../errors';
import { queueTurn } from '../queued-turns';
import { ErrorSchema, WORKFLOW_ID } from '../schemas';

export const WEBHOOKS_PATH = '/workflows/v1/webhooks';
const DEFAULT_MAX_BODY = 1024 * 1024;
const DEFAULT_MAX_DEPTH = 64;

/** The URL a workflow's deliveries go to: EASEL_PUBLIC_URL's, or a path on this server when none is configured. */
export function webhookUrl(deps: Pick<AppDeps, 'publicUrl'>, webhookId: string): string {
  return `${deps.publicUrl ?? ''}${WEBHOOKS_PATH}/${webhookId}`;
}

/**
 * `{webhook_url}` for a workflow whose active version is in webhook mode; nothing otherwise.
 * An anonymous webhook's URL is all it takes to start its runs, so it is shown to admin keys
 * only (`admin`); one that asks for credentials, to whoever reads the workflow. Makes the
 * webhook should the import not have (a workflow stored before webhooks existed, a failed write).
 */
export async function webhookFields(deps: AppDeps, tenant: string, w: StoredWorkflow, admin: boolean): Promise<{ webhook_url?: string }> {
  if (w.deleted) return {};
  const workflow = await compiledVersion(deps.engine, tenant, w.id, w.activeVersion).catch(() => undefined);
  return workflow ? webhookFieldsOf(deps, tenant, w, workflow, admin) : {};
}

/**
 * What the native view of a workflow says of its active version: its Begin's prologue (what
 * a chat shows first; '' when none) and, in webhook mode, where deliveries go.
 */
export async function activeVersionFields(deps: AppDeps, tenant: string, w: StoredWorkflow, admin: boolean): Promise<{ prologue: string; webhook_url?: string }> {
  if (w.deleted) return { prologue: '' };
  const workflow = await compiledVersion(deps.engine, tenant, w.id, w.activeVersion).catch(() => undefined);
  if (!workflow) return { prologue: '' };
  return { prologue: entryPrologue(workflow), ...(await webhookFieldsOf(deps, tenant, w, workflow, admin)) };
}

async function webhookFieldsOf(deps: AppDeps, tenant: string, w: StoredWorkflow, workflow: Workflow, admin: boolean): Promise<{ webhook_url?: string }> {
  const config = (workflow.node(workflow.entryId).params as { webhook?: WebhookConfig } | undefined)?.webhook;
  if (!config) return {};
  const anonymous = !config.security || config.security.auth_type === 'none';
  if (anonymous && !admin) return {};
  return { webhook_url: webhookUrl(deps, w.webhookId ?? (await ensureWebhook(deps.engine.store, tenant, w.id))) };
}

export function webhookRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { engine } = deps;
  const credentials = deps.secrets ? new WebhookCredentials(deps.secrets) : undefined;
  const serverMax = deps.limits?.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const now = () => (engine.clock ?? Date.now)();

  const deliver = async (c: Context<AppEnv>, hook: Webhook | null, byWorkflowId: boolean): Promise<Response> => {
    if (!hook) throw new HttpError('not_found', 'no webhook at this address (no such workflow, or it is not in webhook mode)');
    const { workflow } = await resolveWorkflow(engine, hook.tenant, hook.workflowId).catch((error: unknown) => {
      throw error instanceof NotFoundError ? new HttpError('not_found', 'no webhook at this address (its workflow was deleted)') : error;
    });
    const { beginId, config } = webhookEntry(workflow);
    const delivery: Delivery = { method: c.req.method, headers: c.req.raw.headers, query: new URL(c.req.url).searchParams, clientAddress: deps.clientAddress?.(c) };
    const payload = await refusals(async () => {
      checkMethod(config, delivery.method);
      checkAddress(config, delivery.clientAddress);
      await authenticate(config, delivery, { tenant: hook.tenant, credentials, now: now(), byWorkflowId });
      const raw = await readBody(c.req.raw, bodyLimitOf(config, serverMax));
      const parsed = await parsePayload(config, delivery, raw, deps.limits?.maxJsonDepth ?? DEFAULT_MAX_DEPTH);
      return { ...parsed, key: deliveryKey(delivery.headers) };
    });
    const { key, ...webhookPayload } = payload;
    await takeDelivery(engine.store, hook.tenant, hook.id, config, now());
    const clientAddress = delivery.clientAddress;
    const request: TurnRequest = {
      tenant: hook.tenant,
      workflowId: hook.workflowId,
      // the tenant's run; redeliveries meet within this webhook only
      ...webhookRun(hook.id),
      dialect: 'ragflow',
      runInput: { webhook_payload: webhookPayload },
      ...(clientAddress ? { clientAddress } : {}),
      ...(key ? { idempotencyKey: key } : {}),
    };
    const answer = config.execution_mode === 'Immediately'
      ? await accepted(request, (run) => acceptedAnswer(config, beginId, webhookPayload, run))
      : await final(request, config);
    const headers = new Headers(answer.headers);
    return new Response(c.req.method === 'HEAD' ? null : answer.body, { status: answer.status, headers });
  };

  /** The turn is claimed now and run by the worker; a redelivery finds it claimed (or committed) and queues nothing. */
  const accepted = async (request: TurnRequest, answer: (run: { runId: string; turn: number }) => WebhookAnswer): Promise<WebhookAnswer> => {
    if (!deps.enqueue) throw new HttpError('unavailable', 'no turn queue is configured here: an "Immediately" webhook cannot run');
    const queued = await queueTurn(deps, request, { run_input: { webhook_payload: request.runInput?.webhook_payload ?? {} } });
    if ('replay' in queued) return answer({ runId: queued.replay.response.run_id, turn: queued.replay.response.turn_number });
    return answer('running' in queued ? queued.running : queued.queued);
  };

  const final = async (request: TurnRequest, config: Parameters<typeof finalAnswer>[0]): Promise<WebhookAnswer> => {
    const result = await executeTurn(engine, request);
    try {
      return finalAnswer(config, result.response);
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      throw new HttpError('workflow_failed', error.message, {
        run_id: error.runId,
        status: error.status,
        ...(error.error?.component_id ? { component_id: error.error.component_id } : {}),
      });
    }
  };

  const methods = [...WEBHOOK_METHODS];
  app.on(methods, `${WEBHOOKS_PATH}/:id`, async (c) => deliver(c, await getWebhook(engine.store, c.req.param('id')), false));
  app.on(methods, '/api/v1/agents/:id/webhook', async (c) => {
    const id = c.req.param('id');
    return deliver(c, WORKFLOW_ID.safeParse(id).success ? await webhookOfWorkflow(engine.store, id) : null, true);
  });

  const errorJson = (description: string) => ({ description, content: { 'application/json': { schema: ErrorSchema } } });
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: `${WEBHOOKS_PATH}/{webhook_id}`,
    summary: 'A delivery into a workflow in webhook mode (also GET, PUT, PATCH, DELETE, HEAD as its Begin allows; also at /api/v1/agents/{id}/webhook)',
    description: 'Authenticated by the Begin\u2019s security settings, not by an API key. `Idempotency-Key` or a delivery id header (X-Delivery-Id, X-GitHub-Delivery, X-Gitlab-Event-UUID, webhook-id, X-Shopify-Webhook-Id, X-Request-Id) makes a redelivery replay the first answer.',
    request: { params: z.object({ webhook_id: z.string().regex(WEBHOOK_ID) }) },
    responses: {
      200: { description: 'Streaming: the run\u2019s result (`{message, success, code, run_id, status}`, or the response template)' },
      202: { description: 'Immediately: `{run_id, turn_number, status: "running"}` (or the response template); the worker runs it' },
      400: errorJson('invalid_request: the method, content type or a field of the schema (named in `field`, all in `fields`)'),
      401: errorJson('unauthorized: the delivery\u2019s credentials'),
      403: errorJson('forbidden: the sender\u2019s address is not in the whitelist'),
      404: errorJson('not_found: no such webhook, or the workflow is not in webhook mode'),
      413: errorJson('payload_too_large'),
      422: errorJson('workflow_failed (Streaming): the run failed, with `run_id` and `status`; idempotency_mismatch'),
      429: errorJson('rate_limited: the webhook\u2019s rate limit'),
    },
  });
  return app;
}

/** A DeliveryRefused answered as the HTTP layer answers one field's refusal. */
async function refusals<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!(error instanceof DeliveryRefused)) throw error;
    throw new HttpError(error.code, error.message, {
      ...(error.field ? { field: error.field } : {}),
      ...(error.fields ? { fields: error.fields } : {}),
    });
  }
}

/** The body, refused (413) past `max` bytes, whether or not it announced its length. */
async function readBody(request: Request, max: number): Promise<Uint8Array> {
  const tooLarge = () => new HttpError('payload_too_large', `the request body is over ${max} bytes`, { field: 'body' });
  const announced = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(announced) && announced > max) throw tooLarge();
  if (!request.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
