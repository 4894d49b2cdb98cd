/**
 * The queue message of one page of a replay (lib/turns/replay-worker.ts): the worker runs the
 * page's runs that an earlier delivery did not finish (those are in the page's results). Told
 * apart from a turn's message (lib/turns/queue.ts) by its `replay` field.
 *
 *   {tenant, workflow_id, replay: {id, page}}
 */
import { z } from 'zod';

export const ReplayPageMessage = z.lazy(() => z.object({
  tenant: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  workflow_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  replay: z.object({
    id: z.string().regex(/^[0-9a-f]{32}$/),
    page: z.number().int().min(0),
  }),
}));
export type ReplayPageMessage = z.output<typeof ReplayPageMessage>;

/** Whether a queue message's body is a replay page's (a JSON object with a `replay` field). */
export function isReplayPage(parsed: unknown): boolean {
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) && 'replay' in parsed;
}
