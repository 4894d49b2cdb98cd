/**
 * Turns still running after their HTTP response was handed over (a stream whose client went
 * away). A Lambda entry point awaits them before it returns, so the invocation is not frozen
 * with a turn half-done; the Node server simply lets them finish.
 */
const running = new Set<Promise<unknown>>();

export function track(turn: Promise<unknown>): void {
  running.add(turn);
  void turn.finally(() => running.delete(turn)).catch(() => undefined);
}

export async function settleInflight(): Promise<void> {
  while (running.size > 0) await Promise.allSettled([...running]);
}
