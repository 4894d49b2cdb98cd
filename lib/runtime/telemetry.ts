/**
 * Logs and metrics of every entry point: Powertools Logger (JSON lines, level from
 * POWERTOOLS_LOG_LEVEL, INFO by default) behind the small `Logger` the rest of the code takes,
 * and Powertools Metrics (EMF, namespace `Easel`). Metrics are only stored here; a Lambda entry
 * point publishes them with `flush()` at the end of each invocation, so the local server and the
 * tests, which never flush, print nothing. What is HTTP-specific (one log line per request, the
 * route pattern, streamed bodies) lives in lib/http/observability.ts.
 *
 * @example
 *   const telemetry = createTelemetry();
 *   telemetry.logger.info('timers pumped', { fired: 2 });
 *   telemetry.metrics.addMetric('TimersFired', 'Count', 2);
 *   telemetry.flush(); // the end of the invocation: one EMF line
 */
import { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';

export const SERVICE = 'easel';
export const METRICS_NAMESPACE = 'Easel';

/** Structured logging as the app, the worker and the pump use it; fields never carry secrets. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface Telemetry {
  logger: Logger;
  metrics: Metrics;
  /**
   * Runs `hook` at the start of every `flush()`, before the metrics are published (HTTP uses it
   * to record requests whose streamed body was abandoned). A hook given twice runs once.
   */
  beforeFlush(hook: () => void): void;
  /** The end of an invocation, for Lambda entry points: the hooks, then the stored metrics (one EMF line). */
  flush(): void;
}

export function createTelemetry(): Telemetry {
  const powertools = new PowertoolsLogger({ serviceName: SERVICE });
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: SERVICE });
  const hooks = new Set<() => void>();
  return {
    logger: {
      info: (message, fields) => powertools.info(message, scrub(fields ?? {})),
      error: (message, fields) => powertools.error(message, scrub(fields ?? {})),
    },
    metrics,
    beforeFlush: (hook) => void hooks.add(hook),
    flush() {
      for (const hook of hooks) hook();
      // nothing stored (an event refused before anything counted): no "no metrics" warning
      if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
    },
  };
}

/** Field names whose values never reach a log line, at any depth. */
const SECRET_FIELD = /secret|password|authorization|cookie|^(token|key|api[-_]?key|x-api-key|body|request_body)$|[-_](token|api[-_]?key)$/i;

function scrub(fields: Record<string, unknown>, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (SECRET_FIELD.test(name)) out[name] = '[redacted]';
    else if (depth < 3 && value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Error)) {
      out[name] = scrub(value as Record<string, unknown>, depth + 1);
    } else out[name] = value;
  }
  return out;
}
