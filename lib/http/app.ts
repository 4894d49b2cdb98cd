/**
 * The one Hono app behind every entry point: the Node server of `npm start`, API Gateway's
 * HTTP API (`handle`) and a Lambda Function URL in streaming mode (`streamHandle`).
 *
 * @example
 *   const app = createApp(appDeps(buildRuntime(readConfig())));
 *   serve({ fetch: app.fetch, port: 3000 });
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import type { KnowledgeAdmin } from '../knowledge/types';
import type { McpRegistry } from '../mcp/registry';
import type { SsrfGuard } from '../outbound/ssrf';
import type { Logger } from '../runtime/telemetry';
import type { TenantSecrets } from '../secrets/tenant-secrets';
import { StopAccepted, type TurnEngine } from '../turns/execute';
import { TurnQueued } from '../turns/turn-queued';
import type { WorkerMessage } from '../turns/queue';
import type { EmbedSecrets } from '../secrets/embed-secrets';
import type { AccessTokens } from './access';
import { END_USER_TOKEN_HEADER, RUN_TOKEN_HEADER, type Authenticator, type Principal } from './auth';
import { errorResponse, HttpError, INTERNAL_ERROR, validationHook } from './errors';
import { endUserRoutes } from './routes/end-users';
import { registerExecuteRoutes } from './routes/execute';
import { registerFileRoutes } from './routes/files';
import { registerForkRoutes } from './routes/forks';
import { registerReplayRoutes } from './routes/replays';
import { FORM_LINK_PATH, formLinkRoutes, registerFormLinkRoutes } from './routes/form-links';
import { registerKeyRoutes } from './routes/keys';
import { registerMigrationRoutes } from './routes/migrations';
import { registerRunRoutes } from './routes/runs';
import { secretRoutes } from './routes/secrets';
import { registerWorkflowRoutes } from './routes/workflows';
import { registerWorkflowSettingsRoutes } from './routes/workflow-settings';
import { webhookRoutes } from './routes/webhooks';
import { registerRagflowRoutes } from './ragflow';
import { OPENAPI_INFO } from './openapi';
import { registerPlayground } from './playground';
import { ADMIN_ROUTE_GROUPS, DOCUMENT_UPLOAD_PATH, mountAll, mountLazily } from './route-groups';

export interface HttpLimits {
  /** Request bodies. @default 1 MiB */
  maxBodyBytes: number;
  /** Nesting of JSON bodies. @default 64 */
  maxJsonDepth: number;
  /** Execute responses past this carry `events_truncated`. @default 256 KiB */
  maxResponseBytes: number;
}

export const DEFAULT_LIMITS: HttpLimits = { maxBodyBytes: 1024 * 1024, maxJsonDepth: 64, maxResponseBytes: 256 * 1024 };

/** The app logs through the runtime's logger (lib/runtime/telemetry.ts). */
export type { Logger };

export interface AppDeps {
  engine: TurnEngine;
  auth: Authenticator;
  limits?: Partial<HttpLimits>;
  logger?: Logger;
  /** Tenant secrets (`/workflows/v1/secrets`); absent: those routes answer 503. */
  secrets?: TenantSecrets;
  /** Run and file tokens for public keys; absent: none are issued, and execute keys reach no run. */
  access?: AccessTokens;
  /** Embed secrets (`/workflows/v1/embed-secrets`) that end-user tokens are signed with. */
  embedSecrets?: EmbedSecrets;
  /** Where key secrets are made; injectable for tests. */
  newSecret?: () => string;
  /** Largest form value or query. @default 64 KiB */
  maxFieldBytes?: number;
  /** Components allowed in an uploaded DSL. @default 500 */
  maxDslNodes?: number;
  /** Uploaded files. @default 4 MiB */
  maxFileBytes?: number;
  /** Knowledge bases (`/workflows/v1/knowledge-bases`, RAGFlow's datasets); absent: those routes answer 503. */
  knowledge?: KnowledgeAdmin;
  /** Tenants' MCP servers (`/workflows/v1/mcp-servers`, RAGFlow's `/api/v1/mcp/servers`); absent: those routes answer 503. */
  mcp?: McpRegistry;
  /** A knowledge base document, one upload. @default MAX_DOCUMENT_BYTES (4 MiB) */
  maxDocumentBytes?: number;
  /**
   * The SSRF guard for URLs tenants give the API to be called later (`callback_url`): the
   * runtime's, with the operator's allow-list. @default a guard with no allow-list
   */
  guard?: SsrfGuard;
  /** Hands an async turn (already claimed) or a replay's page to the worker; absent: `Prefer: respond-async` and replays are refused. */
  enqueue?: (message: WorkerMessage) => Promise<void>;
  /** How long an async turn's claim is kept with no worker alive (EASEL_ASYNC_LEASE_MS). @default 20 min */
  asyncLeaseMs?: number;
  /**
   * How long one SSE stream following a turn lasts before it ends (the client reconnects with
   * Last-Event-ID): under the hosting's own time limit. @default 10 min
   */
  followMaxMs?: number;
  /** Browser origins allowed to call the API (CORS); `*` for any. @default [] (same origin only) */
  corsOrigins?: readonly string[];
  /** CSP `frame-ancestors` of the playground page. @default ["'self'"] */
  frameAncestors?: readonly string[];
  /**
   * The client's address, for the run-start limit per address (lib/http/client-address.ts): the
   * socket's under npm start, the event's `requestContext` on Lambda. @default none known
   */
  clientAddress?: (c: Context) => string | undefined;
  /**
   * The API's public base URL (EASEL_PUBLIC_URL, no trailing slash) that webhook URLs are built
   * on; absent: they are shown as paths on this server. @default none
   */
  publicUrl?: string;
  /**
   * The document `GET /openapi.json` serves: on Lambda the one generated into the package
   * (lib/http/openapi.ts). @default generated from this app's routes on the first request
   */
  openapiDocument?: () => Promise<unknown>;
  /** The base URL form links point at (EASEL_FORM_BASE_URL). @default `publicUrl`, else a path */
  formBaseUrl?: string;
}

export type AppEnv = { Variables: { principal: Principal } };
export type App = OpenAPIHono<AppEnv>;

export function createApp(deps: AppDeps): App {
  const limits = { ...DEFAULT_LIMITS, ...deps.limits };
  const app: App = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.onError((error, c) => {
    if (error instanceof StopAccepted) {
      c.header('location', `/workflows/v1/workflow-runs/${error.runId}`);
      return c.json({ run_id: error.runId, turn_number: error.turn, status: 'running' }, 202);
    }
    // a double-text queued behind the turn in flight (lib/turns/double-text.ts)
    if (error instanceof TurnQueued) {
      c.header('location', `/workflows/v1/workflow-runs/${error.runId}`);
      return c.json(error.body(), 202);
    }
    const mapped = errorResponse(error);
    // the rest of an oversized body is never read: the connection cannot be reused
    if (mapped?.status === 413) c.header('connection', 'close');
    for (const [name, value] of Object.entries(mapped?.headers ?? {})) c.header(name, value);
    if (mapped) return c.json(mapped.body, mapped.status as 400);
    if (error instanceof HTTPException && error.status < 500) {
      return c.json({ code: 'invalid_request', error: error.message || 'invalid request' }, 400);
    }
    deps.logger?.error('unhandled error', { error: error instanceof Error ? error.message : String(error), path: c.req.path });
    return c.json(INTERNAL_ERROR, 500);
  });
  app.notFound(notFound);

  app.get('/health', (c) => c.json({ status: 'ok' }));
  // the playground page (no auth: its API calls carry the key) and CORS, before auth runs
  registerPlayground(app, deps);
  // deliveries authenticate as their Begin says, not with an API key: before the key middleware
  app.route('/', webhookRoutes(deps));

  const jsonBodyLimit = bodyLimit({
    maxSize: limits.maxBodyBytes,
    onError: () => {
      throw new HttpError('payload_too_large', `the request body is over ${limits.maxBodyBytes} bytes`);
    },
  });
  // uploads have their own, larger limits (routes/files.ts, routes/knowledge-bases.ts)
  const isUpload = (c: Context) => c.req.path === '/workflows/v1/files' || (c.req.method === 'POST' && DOCUMENT_UPLOAD_PATH.test(c.req.path));
  app.use('/workflows/v1/*', (c, next) => (isUpload(c) ? next() : jsonBodyLimit(c, next)));
  // a form link is answered without a key: its routes come before the key is asked for
  app.use(FORM_LINK_PATH, async (c, next) => {
    if (c.req.method === 'POST') await parseJsonOnce(c, limits.maxJsonDepth);
    await next();
  });
  app.route('/', formLinkRoutes(deps));
  app.use('/workflows/v1/*', async (c, next) => {
    c.set('principal', await deps.auth.authenticate({
      authorization: c.req.header('authorization'),
      runToken: c.req.header(RUN_TOKEN_HEADER),
      endUserToken: c.req.header(END_USER_TOKEN_HEADER),
    }));
    if (c.req.method === 'POST' || c.req.method === 'PUT' || c.req.method === 'PATCH') await parseJsonOnce(c, limits.maxJsonDepth);
    await next();
  });

  registerKeyRoutes(app, deps);
  registerWorkflowRoutes(app, deps);
  registerWorkflowSettingsRoutes(app, deps);
  registerExecuteRoutes(app, deps, limits);
  registerRunRoutes(app, deps);
  registerForkRoutes(app, deps);
  registerReplayRoutes(app, deps);
  registerMigrationRoutes(app, deps);
  registerFileRoutes(app, deps);
  registerFormLinkRoutes(app, deps);
  app.route('/workflows/v1/secrets', secretRoutes(deps));
  // loaded on their first request: a cold start serving turns does not build them
  for (const group of ADMIN_ROUTE_GROUPS) mountLazily(app, group, deps, notFound);
  app.route('/workflows/v1', endUserRoutes(deps));
  registerRagflowRoutes(app as unknown as Hono<AppEnv>, deps);

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  let generated: Promise<unknown> | undefined;
  const document = deps.openapiDocument ?? (() => (generated ??= openapiDocumentFor(deps)));
  app.get('/openapi.json', async (c) => c.json(await document()));
  return app;
}

function notFound(c: Context): Response {
  return c.json({ code: 'not_found', error: 'no such route' }, 404);
}

/**
 * The OpenAPI document of the app `deps` build (what `npm run bundle` writes into the HTTP
 * packages): the native routes' from their zod schemas, the route groups loaded on first use
 * included, and the RAGFlow-compatible routes' from their descriptions
 * (lib/http/ragflow/openapi.ts, loaded only here).
 */
export async function openapiDocumentFor(deps: AppDeps): Promise<unknown> {
  const app = createApp(deps);
  await mountAll(app, deps);
  const { withRagflowRoutes } = await import('./ragflow/openapi');
  return withRagflowRoutes(app.getOpenAPI31Document(OPENAPI_INFO));
}

/**
 * Malformed JSON and hostile nesting are refused before any handler sees the body, and the
 * body is parsed here once: the route's validator and handler get this parse from
 * `c.req.json()` (Hono would parse the text again for each).
 */
async function parseJsonOnce(c: Context, maxDepth: number): Promise<void> {
  if (!(c.req.header('content-type') ?? '').includes('json')) return;
  const text = await c.req.text();
  if (text.trim() === '') return;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') {
      if (++depth > maxDepth) throw new HttpError('invalid_request', `the JSON body nests deeper than ${maxDepth} levels`);
    } else if (ch === '}' || ch === ']') depth--;
  }
  let parsed: Promise<unknown>;
  try {
    parsed = Promise.resolve(JSON.parse(text));
  } catch {
    throw new HttpError('invalid_request', 'the body is not valid JSON');
  }
  c.req.json = <T>() => parsed as Promise<T>;
}
