/**
 * SQS consumer: queued and async turns; reports partial batch failures for SQS to redeliver.
 * A turn still running near the end of the invocation is suspended at a checkpoint and queued
 * again, so no turn is bounded by Lambda's 15 minutes.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { readConfig } from '../lib/config';
import { buildRuntime, createTelemetry, queueDeps } from '../lib/runtime';
import { processBatch } from '../lib/turns/queue';

const config = readConfig();
const telemetry = createTelemetry();
const runtime = buildRuntime(config, { logger: telemetry.logger });
const deps = queueDeps(runtime, { count: (outcome) => telemetry.metrics.addMetric(`QueuedTurns_${outcome}`, 'Count', 1) });

export async function handler(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
  const remaining = context?.getRemainingTimeInMillis?.();
  try {
    return await processBatch(
      deps,
      event.Records,
      remaining === undefined ? {} : { stopBy: Date.now() + remaining - config.queue.workerMarginMs },
    );
  } finally {
    telemetry.flush();
  }
}
