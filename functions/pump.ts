/** Scheduled every minute: fires the form timers that are due. */
import { readConfig } from '../lib/config';
import { buildRuntime, createTelemetry } from '../lib/runtime';
import { pumpDueTimers } from '../lib/turns/timers';

const telemetry = createTelemetry();
const runtime = buildRuntime(readConfig(), { logger: telemetry.logger });

export async function handler(): Promise<{ fired: number; skipped: number; failed: number }> {
  try {
    const report = await pumpDueTimers(runtime.engine, 100, (m, f) => telemetry.logger.error(m, f));
    telemetry.logger.info('timers pumped', { ...report });
    telemetry.metrics.addMetric('TimersFired', 'Count', report.fired);
    return report;
  } finally {
    telemetry.flush();
  }
}
