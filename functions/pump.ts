/** Scheduled every minute: fires the form timers that are due. */
import type { Context } from 'aws-lambda';
import { readConfig } from '../lib/config';
import { buildRuntime, createTelemetry, invocationDeadline } from '../lib/runtime';
import { pumpDueTimers } from '../lib/turns/timers';

const config = readConfig();
const telemetry = createTelemetry();
// a timer's turn still running shortly before the invocation times out is aborted; its claim is given back
const deadline = invocationDeadline(config.deadlineMarginMs);
const runtime = buildRuntime(config, { logger: telemetry.logger, lifecycle: deadline.lifecycle });

export async function handler(_event?: unknown, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<{ fired: number; skipped: number; failed: number }> {
  if (context?.getRemainingTimeInMillis) deadline.arm(context);
  try {
    const report = await pumpDueTimers(runtime.engine, 100, (m, f) => telemetry.logger.error(m, f));
    telemetry.logger.info('timers pumped', { ...report });
    telemetry.metrics.addMetric('TimersFired', 'Count', report.fired);
    return report;
  } finally {
    deadline.disarm();
    telemetry.flush();
  }
}
