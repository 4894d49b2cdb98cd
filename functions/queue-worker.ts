/**
 * SQS consumer: queued and async turns; reports partial batch failures for SQS to redeliver.
 * A turn still running near the end of the invocation is suspended at a checkpoint and queued
 * again, so no turn is bounded by Lambda's 15 minutes.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { readConfig } from '../lib/config';
import { buildDeps } from '../lib/http/deps';
import { createTelemetry } from '../lib/http/observability';
import { SsrfGuard } from '../lib/outbound/ssrf';
import { processBatch } from '../lib/turns/queue';

const config = readConfig();
const telemetry = createTelemetry();
const deps = buildDeps(config, { logger: telemetry.logger });
const guard = new SsrfGuard({ allow: config.ssrfAllow });

export async function handler(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
  const remaining = context?.getRemainingTimeInMillis?.();
  try {
    return await processBatch(
      {
        engine: deps.engine,
        guard,
        log: (message, fields) => telemetry.logger.info(message, fields),
        count: (outcome) => telemetry.metrics.addMetric(`QueuedTurns_${outcome}`, 'Count', 1),
        ...(deps.enqueue ? { requeue: deps.enqueue } : {}),
        holdMs: config.queue.asyncLeaseMs,
      },
      event.Records,
      remaining === undefined ? {} : { stopBy: Date.now() + remaining - config.queue.workerMarginMs },
    );
  } finally {
    telemetry.flush();
  }
}
