/**
 * Comparing a replayed turn with its record: the events as the turn record keeps them (message
 * deltas merged), without what a replay cannot reproduce and nobody would call a difference —
 * times (`created_at`, `elapsed_time`), a component's display name, the token usage of the turn.
 *
 * Two things come out: the first event that differs, and the components that behaved otherwise:
 * their outputs (or error) differ (`outputs`), their form asked other fields (`form`), or they ran
 * in one turn only (`recorded_only`, `replayed_only`: a branch went elsewhere), in the order they
 * first appear.
 */
import type { CanvasEvent } from '../canvas';
import { canonicalJson } from '../store/codec';

/** Values in a report are cut past this many bytes of JSON. */
export const REPORT_VALUE_BYTES = 2048;

export interface EventDifference {
  /** Its position in the turn's events (message deltas merged). */
  event_index: number;
  recorded: CanvasEvent | null;
  replayed: CanvasEvent | null;
}

export interface ComponentChange {
  component_id: string;
  turn: number;
  change: 'outputs' | 'form' | 'recorded_only' | 'replayed_only';
  /** Outputs (or `{error}`) as recorded and as replayed, where the component ran. */
  recorded?: unknown;
  replayed?: unknown;
}

export interface TurnComparison {
  first: EventDifference | null;
  components: ComponentChange[];
}

/** Keys of event data a replay cannot reproduce and that do not tell behaviour apart. */
const IGNORED = new Set(['created_at', 'elapsed_time', 'component_name', 'usage']);

export function compareTurn(turn: number, recorded: readonly CanvasEvent[], replayed: readonly CanvasEvent[], forms: { recorded: string[]; replayed: string[] }): TurnComparison {
  const a = recorded.map(comparable);
  const b = replayed.map(comparable);
  let first: EventDifference | null = null;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] === b[i]) continue;
    first = { event_index: i, recorded: bounded(recorded[i] ?? null) as CanvasEvent | null, replayed: bounded(replayed[i] ?? null) as CanvasEvent | null };
    break;
  }
  if (!first) return { first: null, components: [] };

  const ran = { recorded: finishes(recorded), replayed: finishes(replayed) };
  const components: ComponentChange[] = [];
  for (const id of firstAppearance(recorded, replayed)) {
    const was = ran.recorded.get(id);
    const is = ran.replayed.get(id);
    if (was && !is) components.push({ component_id: id, turn, change: 'recorded_only', recorded: bounded(was[0]) });
    else if (is && !was) components.push({ component_id: id, turn, change: 'replayed_only', replayed: bounded(is[0]) });
    else if (was && is) {
      const at = differingIndex(was, is);
      if (at >= 0) components.push({ component_id: id, turn, change: 'outputs', recorded: bounded(was[at] ?? null), replayed: bounded(is[at] ?? null) });
    }
  }
  // a form that asks otherwise (its `user_inputs` ends the turn), or asks where the other did not
  const asked = (events: readonly CanvasEvent[], keys: readonly string[]) => (events.at(-1)?.event === 'user_inputs' ? keys.at(-1) : undefined);
  if (asked(recorded, a) !== asked(replayed, b)) {
    for (const id of new Set([...forms.recorded, ...forms.replayed])) {
      if (!components.some((c) => c.component_id === id)) components.push({ component_id: id, turn, change: 'form' });
    }
  }
  return { first, components };
}

/** An event as compared: canonical JSON without the ignored keys. */
function comparable(e: CanvasEvent): string {
  return canonicalJson({ event: e.event, data: strip(e.data) });
}

function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (!IGNORED.has(k)) out[k] = strip(v);
  return out;
}

/** Each component's `node_finished` outputs (or `{error}`), in order: several in a Loop or Iteration. */
function finishes(events: readonly CanvasEvent[]): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const e of events) {
    if (e.event !== 'node_finished') continue;
    const value = e.data.error !== null ? { error: e.data.error } : e.data.outputs;
    const list = out.get(e.data.component_id);
    if (list) list.push(value);
    else out.set(e.data.component_id, [value]);
  }
  return out;
}

/** The components of either turn, by where each first appears in its own turn's events. */
function firstAppearance(recorded: readonly CanvasEvent[], replayed: readonly CanvasEvent[]): string[] {
  const at = new Map<string, number>();
  for (const events of [recorded, replayed]) {
    events.forEach((e, i) => {
      if (e.event !== 'node_started' && e.event !== 'node_finished') return;
      const known = at.get(e.data.component_id);
      if (known === undefined || i < known) at.set(e.data.component_id, i);
    });
  }
  return [...at.entries()].sort((x, y) => x[1] - y[1]).map(([id]) => id);
}

function differingIndex(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (i >= a.length || i >= b.length || canonicalJson(strip(a[i])) !== canonicalJson(strip(b[i]))) return i;
  }
  return -1;
}

/** A value for a report: as it is when small, else cut (`{truncated, bytes, preview}`). */
export function bounded(value: unknown, limit = REPORT_VALUE_BYTES): unknown {
  if (value === undefined) return null;
  const text = JSON.stringify(value) ?? 'null';
  if (text.length <= limit) return value;
  return { truncated: true, bytes: Buffer.byteLength(text), preview: text.slice(0, Math.floor(limit / 4)) };
}
