/** Scheduled every minute: fires the form timers that are due. */
import { readConfig } from '../lib/config';
import { buildDeps } from '../lib/http/deps';
import { createTelemetry } from '../lib/http/observability';
import { pumpDueTimers } from '../lib/turns/timers';

const telemetry = createTelemetry();
const deps = buildDeps(readConfig(), { logger: telemetry.logger });

export async function handler(): Promise<{ fired: number; skipped: number; failed: number }> {
  try {
    const report = await pumpDueTimers(deps.engine, 100, (m, f) => telemetry.logger.error(m, f));
    telemetry.logger.info('timers pumped', { ...report });
    telemetry.metrics.addMetric('TimersFired', 'Count', report.fired);
    return report;
  } finally {
    telemetry.flush();
  }
}
