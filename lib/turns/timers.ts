/**
 * Background work while a run waits: a form's timer. When it fires — through the scheduled pump
 * or on demand — the run takes a `timeout` turn: the waiting form runs without an answer and
 * goes to its timeout branch. A timer and a user's answer racing each other are ordered by the
 * same claim and commit as any two turns: exactly one of them is committed.
 */
import { NoTimerArmedError, NotWaitingForInputError } from '../canvas/errors';
import { NotFoundError, TurnConflictError, TurnInProgressError } from '../store/errors';
import { listDueRuns } from '../store/session-listing';
import { getHead } from '../store/sessions';
import { executeTurn, type TurnEngine, type TurnHooks, type TurnResult } from './execute';
import { RateLimitedError } from './quotas';

/** Its time has not come (the pump looked at a run whose timer was moved, or whose clock differs). */
class NotDueError extends Error {}

/**
 * Fires the run's armed timer now (`onlyIfDue`: only if its time has come). NoTimerArmedError
 * (409 `no_timer_armed`) when the run has no timer armed.
 */
export async function fireTimer(engine: TurnEngine, tenant: string, runId: string, options: { onlyIfDue?: boolean; hooks?: TurnHooks } = {}): Promise<TurnResult> {
  const head = await getHead(engine.store, tenant, runId);
  const now = (engine.clock ?? Date.now)();
  if (head.dueAt === null || head.dueAt === undefined) throw new NoTimerArmedError(head.status);
  if (options.onlyIfDue && head.dueAt > now) throw new NotDueError();
  return executeTurn(engine, {
    tenant,
    workflowId: head.workflowId,
    runId,
    turnNumber: head.turn,
    runInput: { command: 'timeout' },
    actor: { kind: 'timer', id: runId },
    ...(options.hooks ? { hooks: options.hooks } : {}),
  });
}

export interface PumpReport {
  fired: number;
  /** Answered or advanced by someone else first: nothing to do; or the tenant's budget is spent (fired at a later pump). */
  skipped: number;
  failed: number;
}

/** Fires every due timer (up to `limit`): what the scheduled pump runs. */
export async function pumpDueTimers(engine: TurnEngine, limit = 100, log?: (message: string, fields: Record<string, unknown>) => void): Promise<PumpReport> {
  const due = await listDueRuns(engine.store, (engine.clock ?? Date.now)(), limit);
  const report: PumpReport = { fired: 0, skipped: 0, failed: 0 };
  for (const run of due) {
    // the entry point is stopping (its invocation is about to end): the rest wait for the next pump
    if (engine.lifecycle?.signal()?.aborted) break;
    try {
      await fireTimer(engine, run.tenant, run.id, { onlyIfDue: true });
      report.fired++;
    } catch (error) {
      // answered, advanced or deleted by someone else first, or not due after all
      const moved = error instanceof TurnConflictError || error instanceof TurnInProgressError || error instanceof NotFoundError;
      if (moved || error instanceof NoTimerArmedError || error instanceof NotWaitingForInputError || error instanceof NotDueError || error instanceof RateLimitedError) {
        report.skipped++;
      } else {
        report.failed++;
        log?.('timer failed', { tenant: run.tenant, run_id: run.id, error: error instanceof Error ? error.message : String(error) });
      }
    }
  }
  return report;
}
