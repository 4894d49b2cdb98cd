/**
 * What the queue worker's batch handler (lib/turns/queue `processBatch`) takes, from a runtime:
 * the engine, the guard for webhooks, the claim hold, and the queue for continuations. The
 * Lambda worker and npm start's in-process worker both run on this.
 *
 * @example
 *   await processBatch(queueDeps(runtime, { count: (outcome) => metrics.addMetric(outcome, 'Count', 1) }), records);
 */
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
    ...overrides,
  };
}
