/**
 * SQS consumer: queued and async turns; reports partial batch failures for SQS to redeliver.
 * A turn still running near the end of the invocation is suspended at a checkpoint and queued
 * again (EASEL_WORKER_MARGIN_MS before it), so no turn is bounded by Lambda's 15 minutes; a
 * batch still running EASEL_DEADLINE_MARGIN_MS before the end is aborted, and the turn is
 * queued again from its last checkpoint.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { readConfig } from '../lib/config';
import { buildRuntime, createTelemetry, invocationDeadline, queueDeps } from '../lib/runtime';
import { processBatch } from '../lib/turns/queue';

const config = readConfig();
const telemetry = createTelemetry();
const deadline = invocationDeadline(config.deadlineMarginMs);
const runtime = buildRuntime(config, { logger: telemetry.logger, lifecycle: deadline.lifecycle });
const deps = queueDeps(runtime, { count: (outcome) => telemetry.metrics.addMetric(`QueuedTurns_${outcome}`, 'Count', 1) });

export async function handler(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
  const remaining = context?.getRemainingTimeInMillis?.();
  if (remaining !== undefined && context) deadline.arm(context);
  try {
    return await processBatch(
      deps,
      event.Records,
      remaining === undefined ? {} : { stopBy: Date.now() + remaining - config.queue.workerMarginMs },
    );
  } finally {
    deadline.disarm();
    telemetry.flush();
  }
}
