/**
 * Following a turn from a cursor: the events of an async turn as its checkpoints store them
 * while it runs, then the rest from the committed turn. Events come with message deltas merged,
 * as the committed response holds them, so a reader who follows a turn from start to end reads
 * exactly the committed `events` list.
 *
 * The cursor is opaque to clients: `<event items read>.<events read>`.
 */
import { EaselError } from '../errors';
import { readProgress } from '../store/checkpoints';
import { NotFoundError } from '../store/errors';
import { getHead, getTurn } from '../store/sessions';
import type { TurnEngine } from './execute';

export interface TurnEvents {
  turn_number: number;
  /** `running` while the turn is in flight; the turn's status once committed. */
  status: string;
  committed: boolean;
  events: unknown[];
  /** Where to read on from after each event (for SSE ids). */
  cursors: string[];
  /** Where to read on from. */
  next_cursor: string;
  /** The committed response body (once committed). */
  response?: string;
}

export interface Cursor {
  seq: number;
  index: number;
}

export function parseCursor(raw: string | undefined): Cursor {
  if (raw === undefined || raw === '') return { seq: 0, index: 0 };
  const m = /^(\d{1,6})\.(\d{1,7})$/.exec(raw);
  if (!m) throw new EaselError('invalid_request', 'cursor must be a value returned as next_cursor');
  return { seq: Number(m[1]), index: Number(m[2]) };
}

const formatCursor = (c: Cursor) => `${c.seq}.${c.index}`;

/**
 * The events of turn `turn` after `cursor`. NotFoundError when the run has no such turn, in
 * flight or committed (a turn that was given up before it committed is gone too).
 */
export async function readTurnEvents(engine: TurnEngine, tenant: string, runId: string, turn: number, cursor: Cursor): Promise<TurnEvents> {
  const head = await getHead(engine.store, tenant, runId);
  if (turn > head.turn) {
    const claim = head.claim;
    if (!claim || claim.turn !== turn) throw new NotFoundError('turn');
    const items = await readProgress(engine.store, tenant, runId, turn, claim.token, cursor.seq);
    const events: unknown[] = [];
    const cursors: string[] = [];
    let next = cursor;
    for (const item of items) {
      // an item may start before the cursor's index when the reader stopped inside it
      const skip = Math.max(0, next.index - item.from);
      item.events.slice(skip).forEach((event, k) => {
        events.push(event);
        const index = item.from + skip + k + 1;
        // inside an item the cursor still points before it, so the item is read again
        cursors.push(formatCursor(index === item.from + item.events.length ? { seq: item.seq, index } : { seq: next.seq, index }));
      });
      next = { seq: item.seq, index: Math.max(next.index, item.from + item.events.length) };
    }
    // nothing new: the turn may have committed meanwhile (its checkpoint items are then gone)
    if (items.length === 0) {
      const committed = await getTurn(engine.store, tenant, runId, turn);
      if (committed) return fromCommitted(turn, committed, cursor);
    }
    return { turn_number: turn, status: 'running', committed: false, events, cursors, next_cursor: formatCursor(next) };
  }
  const committed = await getTurn(engine.store, tenant, runId, turn);
  if (!committed) throw new NotFoundError('turn');
  return fromCommitted(turn, committed, cursor);
}

function fromCommitted(turn: number, committed: { status: string; response: string }, cursor: Cursor): TurnEvents {
  const response = JSON.parse(committed.response) as { events: unknown[] };
  const events = response.events.slice(cursor.index);
  return {
    turn_number: turn,
    status: committed.status,
    committed: true,
    events,
    cursors: events.map((_, k) => formatCursor({ seq: cursor.seq, index: cursor.index + k + 1 })),
    next_cursor: formatCursor({ seq: cursor.seq, index: response.events.length }),
    response: committed.response,
  };
}
