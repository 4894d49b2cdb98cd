/**
 * RAGFlow's answer to a message queued behind the turn in flight (the workflow's `on_busy`,
 * lib/turns/double-text.ts). RAGFlow's API has no 202: the completion waits for the queued
 * message's own turn and answers with it, as it answers a replayed turn — whole, once committed
 * (streamed, its events come at once then). A turn that has not committed within the follow
 * limit (`followMaxMs`: 10 min, 20 s behind the HTTP API) is answered code 103 with the
 * session and the turn it is queued as, to be read later. A queued message whose turn was
 * `rejected` (it no longer fitted the session) is answered as that refusal.
 */
import { EaselError } from '../../errors';
import { turnCommittedBy } from '../../store/inbox';
import { getTurn } from '../../store/sessions';
import type { TurnResponse } from '../../turns/response';
import type { TurnResult } from '../../turns/turn-engine';
import type { TurnQueued } from '../../turns/turn-queued';
import type { AppDeps } from '../app';
import { RAGFLOW, RagflowError } from './envelope';

/** How often the store is asked whether the queued turn committed. */
const QUEUED_POLL_MS = 200;

export async function awaitQueuedTurn(deps: AppDeps, tenant: string, queued: TurnQueued): Promise<TurnResult> {
  const store = deps.engine.store;
  const deadline = Date.now() + (deps.followMaxMs ?? 10 * 60_000);
  for (;;) {
    const turn = await turnCommittedBy(store, tenant, queued.runId, queued.from, queued.turn, queued.token);
    const committed = turn === null ? null : await getTurn(store, tenant, queued.runId, turn);
    if (committed) {
      const response = JSON.parse(committed.response) as TurnResponse;
      if (response.status === 'rejected' && response.error) throw new EaselError(response.error.code as EaselError['code'], response.error.message);
      return { body: committed.response, response, replayed: true };
    }
    if (Date.now() >= deadline) {
      throw new RagflowError(RAGFLOW.operation, `The message is queued as turn ${queued.turn} of the session and has not run yet; it runs after the turn in progress.`, { session_id: queued.runId, turn_number: queued.turn });
    }
    await new Promise((resolve) => setTimeout(resolve, QUEUED_POLL_MS));
  }
}
