/**
 * What a turn does when it finds another turn of its run in flight ("double-texting";
 * double-text.ts runs it). A setting of the workflow (its default for every request, RAGFlow's
 * routes included), which the execute body's `on_busy` overrides.
 *
 * @example
 *   parseOnBusy('enqueue')                                   // {strategy: 'enqueue', ifSync: 'reject'}
 *   parseOnBusy({ strategy: 'interrupt', if_sync: 'enqueue' }) // interrupt an async turn, queue behind a synchronous one
 */

export const ON_BUSY_STRATEGIES = ['reject', 'enqueue', 'interrupt', 'rollback'] as const;
export type OnBusyStrategy = (typeof ON_BUSY_STRATEGIES)[number];

/** What `interrupt` and `rollback` do against a synchronous turn, which has no checkpoint to stop at. */
export const ON_BUSY_IF_SYNC = ['reject', 'enqueue'] as const;

export interface OnBusy {
  strategy: OnBusyStrategy;
  /** `interrupt` / `rollback` meeting a synchronous turn: answer as `reject` does, or queue as `enqueue` does. */
  ifSync: (typeof ON_BUSY_IF_SYNC)[number];
}

/** Today's 409 `turn_in_progress`. */
export const DEFAULT_ON_BUSY: OnBusy = { strategy: 'reject', ifSync: 'reject' };

/** The API's spelling: a strategy's name, or `{strategy, if_sync?}`. */
export type OnBusyInput = OnBusyStrategy | { strategy: OnBusyStrategy; if_sync?: OnBusy['ifSync'] };

export function parseOnBusy(input: OnBusyInput): OnBusy {
  return typeof input === 'string' ? { strategy: input, ifSync: 'reject' } : { strategy: input.strategy, ifSync: input.if_sync ?? 'reject' };
}

/** As answered and stored: `{strategy, if_sync}`. */
export function onBusyView(onBusy: OnBusy): { strategy: OnBusyStrategy; if_sync: OnBusy['ifSync'] } {
  return { strategy: onBusy.strategy, if_sync: onBusy.ifSync };
}

/** A stored setting (a workflow's), or the default when there is none or it is not one. */
export function readOnBusy(stored: unknown): OnBusy {
  if (typeof stored !== 'object' || stored === null) return DEFAULT_ON_BUSY;
  const { strategy, if_sync: ifSync } = stored as Record<string, unknown>;
  if (!(ON_BUSY_STRATEGIES as readonly unknown[]).includes(strategy)) return DEFAULT_ON_BUSY;
  return { strategy: strategy as OnBusyStrategy, ifSync: ifSync === 'enqueue' ? 'enqueue' : 'reject' };
}
