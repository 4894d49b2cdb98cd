/**
 * What the queue worker's batch handler (lib/turns/queue `processBatch`) takes, from a runtime:
 * the engine, the guard for webhooks, the claim hold, the queue for continuations, and the
 * tokens of the form links paused turns' webhooks carry. The
 * Lambda worker and npm start's in-process worker both run on this.
 *
 * @example
 *   await processBatch(queueDeps(runtime, { count: (outcome) => metrics.addMetric(outcome, 'Count', 1) }), records);
 */
import { formLinkTokens } from '../turns/form-links';
import type { QueueDeps } from '../turns/queue';
import type { Runtime } from './index';

export function queueDeps(runtime: Runtime, overrides: Partial<QueueDeps> = {}): QueueDeps {
  const { logger } = runtime;
  return {
    engine: runtime.engine,
    guard: runtime.guard,
    ...(logger ? { log: (message: string, fields: Record<string, unknown>) => logger.info(message, fields) } : {}),
    ...(runtime.enqueue ? { requeue: runtime.enqueue } : {}),
    holdMs: runtime.config.queue.asyncLeaseMs,
    formLinks: {
      tokens: formLinkTokens((purpose) => runtime.secrets.serverKey(purpose)),
      ...(runtime.config.http.formBaseUrl ?? runtime.config.http.publicUrl ? { baseUrl: runtime.config.http.formBaseUrl ?? runtime.config.http.publicUrl } : {}),
    },
    ...overrides,
  };
}
