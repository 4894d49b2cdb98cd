/**
 * Request telemetry of the HTTP entry points, on top of lib/runtime/telemetry.ts (the logger,
 * the metrics and `flush()` every entry point shares): one log line plus metrics per request,
 * with the route pattern, status, latency and ids, a streamed body measured to its end, and the
 * Lambda context under `handle` or `streamHandle`.
 *
 * @example
 *   const telemetry = createTelemetry();
 *   const app = withTelemetry(createApp(appDeps(buildRuntime(readConfig(), telemetry))), telemetry);
 *   // ... serve one invocation, then:
 *   telemetry.flush();
 */
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context as LambdaContext } from 'aws-lambda';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import type { Logger, Telemetry } from '../runtime/telemetry';
import type { App, AppEnv } from './app';
import type { Principal } from './auth';

/** What `hono/aws-lambda` binds to `c.env`; absent under the Node server. */
interface LambdaBindings {
  requestContext?: { requestId?: string };
  /** under `handle` */
  lambdaContext?: LambdaContext;
  /** under `streamHandle` */
  context?: LambdaContext;
}

/** The invocation's Lambda context under `handle` or `streamHandle`; undefined elsewhere. */
export function lambdaContext(c: Context): LambdaContext | undefined {
  const env = c.env as LambdaBindings | undefined;
  const context = env?.lambdaContext ?? env?.context;
  return typeof context?.awsRequestId === 'string' ? context : undefined;
}

let coldStart = true;
/** Streamed requests whose body has not ended yet, with what records them. */
const open = new Set<(outcome: string) => void>();

/**
 * A streamed body abandoned unread (its writer failed) never ends: its request is recorded now,
 * when the invocation's telemetry is flushed.
 */
function recordAbandoned(): void {
  for (const record of [...open]) record('abandoned');
}

/**
 * One log line and the request metrics per request: method, route pattern (never the raw
 * path: it holds ids), status, latency, tenant once authenticated, correlation id. A streamed
 * body is measured to its end. Without `metrics` it only logs.
 */
export function requestTelemetry(logger: Logger, metrics?: Metrics): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    const cold = coldStart;
    coldStart = false;
    await next();
    const headersMs = Math.round(performance.now() - started);
    const body = c.res.body;
    const streamed = body !== null && (c.res.headers.get('content-type') ?? '').includes('text/event-stream');
    let recorded = false;
    const record = (outcome?: string) => {
      if (recorded) return;
      recorded = true;
      open.delete(record);
      const latencyMs = Math.round(performance.now() - started);
      const status = c.res.status;
      const env = c.env as LambdaBindings | undefined;
      const context = lambdaContext(c);
      const principal = c.get('principal') as Principal | undefined;
      const correlationId = env?.requestContext?.requestId ?? c.req.header('x-amzn-trace-id');
      logger.info('request', {
        method: c.req.method,
        route: routePattern(c),
        status,
        latency_ms: latencyMs,
        ...(streamed ? { headers_ms: headersMs, stream: outcome } : {}),
        ...(principal?.tenant ? { tenant: principal.tenant } : {}),
        ...(correlationId ? { correlation_id: correlationId } : {}),
        ...(context ? { lambda_request_id: context.awsRequestId, cold_start: cold } : {}),
      });
      if (!metrics) return;
      metrics.addMetric('Requests', MetricUnit.Count, 1);
      metrics.addMetric('Latency', MetricUnit.Milliseconds, latencyMs);
      if (status === 409) metrics.addMetric('Conflicts', MetricUnit.Count, 1);
      if (status >= 500) metrics.addMetric('Errors5xx', MetricUnit.Count, 1);
    };
    if (streamed && body) {
      open.add(record);
      c.res = new Response(observeEnd(body, record), c.res);
    } else record();
  };
}

/** The handler's route pattern, or `unmatched`; middleware (`ALL`) never names a request. */
function routePattern(c: Context): string {
  return matchedRoutes(c).filter((route) => route.method !== 'ALL').at(-1)?.path ?? 'unmatched';
}

/** The same bytes; `end` is told once whether the body completed, failed or was cancelled. */
function observeEnd(body: ReadableStream<Uint8Array>, end: (outcome: string) => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          end('complete');
        } else controller.enqueue(value);
      } catch (error) {
        controller.error(error);
        end('failed');
      }
    },
    async cancel(reason) {
      end('cancelled');
      await reader.cancel(reason);
    },
  });
}

/**
 * The app behind request telemetry. The middleware has to run before the app's routes, so it
 * sits in an outer app that mounts them; `route()` copies routes but not the not-found
 * handler, so unmatched requests are answered by the app itself. Each `telemetry.flush()`
 * first records the streamed requests left unfinished.
 */
export function withTelemetry(app: App, telemetry: Pick<Telemetry, 'logger' | 'metrics' | 'beforeFlush'>): Hono<AppEnv> {
  telemetry.beforeFlush(recordAbandoned);
  const outer = new Hono<AppEnv>();
  outer.use('*', requestTelemetry(telemetry.logger, telemetry.metrics));
  outer.route('/', app);
  outer.notFound((c) => app.fetch(c.req.raw, c.env));
  return outer;
}
