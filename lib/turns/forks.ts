/**
 * Forking a run: a new run whose state is the parent's after turn k, on the version turn k ran
 * on (the parent's, unless it was migrated since), linked to it (`forked_from`), numbered on
 * from k (its next turn is k + 1), and self-contained (lib/store/forks.ts). The parent is not changed. The fork's next turn may answer
 * the parent's pause at k differently: a run can go back to any committed turn and try again.
 *
 * With an Idempotency-Key the fork's id is derived from the key (and what it forks): a retry
 * finds the fork it made, and a key used for another fork is `idempotency_mismatch`.
 */
import { randomBytes } from 'node:crypto';
import { EaselError } from '../errors';
import { sha256 } from '../store/codec';
import { RunExistsError } from '../store/errors';
import { readForkSource, writeFork } from '../store/forks';
import { getHead, type SessionHead } from '../store/sessions';
import { ttlOf, type RunOwner, type TurnEngine } from './execute';
import { describeRun, type RunSummary } from './runs';

/** The conversation a fork keeps: the turns up to the forked one whose history it carries. */
export const FORK_HISTORY_TURNS = 50;

export interface ForkRequest {
  tenant: string;
  runId: string;
  turn: number;
  /** Refuses a run the caller may not reach (as a missing one). */
  authorize?: (run: RunOwner) => void;
  /** The principal-scoped hash of an Idempotency-Key. */
  keyHash?: string;
}

export interface ForkResult {
  run: RunSummary;
  /** A retry found the fork it had made. */
  replayed: boolean;
}

export async function forkRun(engine: TurnEngine, request: ForkRequest): Promise<ForkResult> {
  const source = await readForkSource(engine.store, request.tenant, request.runId, request.turn, FORK_HISTORY_TURNS);
  request.authorize?.({ id: source.head.id, workflowId: source.head.workflowId, userId: source.head.userId });
  const id = request.keyHash ? sha256(`easel-fork:${request.keyHash}`).slice(0, 32) : randomBytes(16).toString('hex');
  const state = source.payload.state as { prompt?: { due_at?: number } | null } | undefined;
  try {
    await writeFork(engine.store, source, {
      id,
      userId: source.head.userId,
      ttlSeconds: ttlOf(engine),
      dueAt: state?.prompt?.due_at ?? null,
      now: (engine.clock ?? Date.now)(),
    });
  } catch (error) {
    if (!(error instanceof RunExistsError) || !request.keyHash) throw error;
    const existing = await getHead(engine.store, request.tenant, id);
    if (!sameFork(existing, request)) throw new EaselError('idempotency_mismatch', 'this Idempotency-Key was used for another fork');
    return { run: await describeRun(engine, request.tenant, id), replayed: true };
  }
  return { run: await describeRun(engine, request.tenant, id), replayed: false };
}

function sameFork(head: SessionHead, request: ForkRequest): boolean {
  return head.forkedFrom?.runId === request.runId && head.forkedFrom.turn === request.turn;
}
