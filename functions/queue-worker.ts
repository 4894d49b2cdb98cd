/** SQS consumer: queued and async turns; reports partial batch failures for SQS to redeliver. */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { readConfig } from '../lib/config';
import { buildDeps } from '../lib/http/deps';
import { createTelemetry } from '../lib/http/observability';
import { SsrfGuard } from '../lib/outbound/ssrf';
import { processBatch } from '../lib/turns/queue';

const config = readConfig();
const telemetry = createTelemetry();
const deps = buildDeps(config, { logger: telemetry.logger });
const guard = new SsrfGuard({ allow: config.ssrfAllow });

export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  try {
    return await processBatch(
      {
        engine: deps.engine,
        guard,
        log: (message, fields) => telemetry.logger.info(message, fields),
        count: (outcome) => telemetry.metrics.addMetric(`QueuedTurns_${outcome}`, 'Count', 1),
      },
      event.Records,
    );
  } finally {
    telemetry.flush();
  }
}
