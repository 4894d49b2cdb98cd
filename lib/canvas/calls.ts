/**
 * Call records: every call a turn makes outside the run (a model, a tool, a retrieval, an
 * HTTP request, an e-mail), in the order it was made, kept with the turn. They are what a
 * replay against a new version and the exact resume of a tool loop read: which component made
 * the call, which of its calls it was, what was asked (a hash of the request as the component
 * built it, before any secret was filled in) and what came back.
 *
 * The schema is defined here once (`CallRecord`, version 1). A turn keeps at most
 * `MAX_CALLS_PER_TURN`; later calls are counted in `dropped` and not recorded, so a replay of
 * that turn goes live from the first call that is missing.
 *
 * Exact resume: an async turn checkpoints after every call a component completes inside a
 * batch (an Agent's model rounds and tool calls). The checkpoint holds the state at the batch's
 * start and the calls completed since (`CompletedCall`); the resumed batch runs again and
 * `CallReplay` answers those calls from their records, so none of them is made twice.
 *
 * A call answered from a record is recorded again in the turn that answered it (a resumed
 * approval's earlier rounds, a replay against another version), marked `replayed`: counting a
 * run's calls counts the records without the mark, and a replay tells the calls it answered
 * from those that went live by it.
 */
import { createHash } from 'node:crypto';

export type CallKind = 'model' | 'tool' | 'retrieval' | 'invoke' | 'email';

export interface CallRecord {
  v: 1;
  component_id: string;
  kind: CallKind;
  /** The tool's or model's name, when the kind has one. */
  name?: string;
  /**
   * This component's n-th call of the turn (from 0): tells two identical calls apart, also
   * those of successive rounds of a Loop or Iteration (each round's calls count on).
   */
  ordinal: number;
  /** The containers (Loop, Iteration) the component is in, outermost first. */
  path: string[];
  /** sha256 of the request as built, before secrets: the same request hashes the same. */
  request_hash: string;
  status: 'ok' | 'error';
  /** What came back (JSON). Stored inline when small; long strings go to content-addressed blobs. */
  result?: unknown;
  error?: string;
  /**
   * Answered from an earlier record rather than made (absent: the call was made). Records of
   * turns committed before the mark existed lack it whatever happened.
   */
  replayed?: true;
}

/** What a component reports of one call. */
export interface CallReport {
  kind: CallKind;
  name?: string;
  /** The request as the component built it, with secrets still as `{secret.NAME}` references. */
  request: unknown;
  result?: unknown;
  error?: string;
  /**
   * What answering the call again needs beyond `result` (a tool's references in full): kept in
   * a checkpoint's calls in flight only, never in the turn's records.
   */
  replay?: unknown;
  /** The component answered the call from its record (`recordedCall`) and did not make it. */
  replayed?: boolean;
}

/**
 * Answers calls from records: the calls a resumed batch had completed (`CallReplay`), or those
 * of a recorded turn when the run is replayed against another version. Undefined: make the call.
 */
export interface CallSource {
  /**
   * `accept`: whether the component can answer the call from this record (a retrieval's
   * chunks may be gone, a tool's references kept by id). A record it cannot answer from is used
   * up all the same — the call is made instead — and is not counted as answered.
   */
  take(componentId: string, path: readonly string[], call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept?: (call: CompletedCall) => boolean): CompletedCall | undefined;
}

/** A call of the batch in flight, as a checkpoint keeps it for the batch to run again. */
export interface CompletedCall {
  record: CallRecord;
  replay?: unknown;
}

/** @default bound of recorded calls per turn */
export const MAX_CALLS_PER_TURN = 500;

/** The calls of one turn, in order, bounded. */
export class CallLog {
  readonly records: CallRecord[];
  dropped: number;
  private readonly ordinals = new Map<string, number>();
  /** `CallReport.replay` by record index. */
  private readonly extras = new Map<number, unknown>();

  constructor(from: { records?: readonly CallRecord[]; dropped?: number } = {}, private readonly max = MAX_CALLS_PER_TURN) {
    this.records = [...(from.records ?? [])];
    this.dropped = from.dropped ?? 0;
    for (const r of this.records) this.bump(r.component_id, r.path);
  }

  add(componentId: string, path: readonly string[], report: CallReport): void {
    const ordinal = this.bump(componentId, path);
    if (this.records.length >= this.max) {
      this.dropped++;
      return;
    }
    if (report.replay !== undefined) this.extras.set(this.records.length, report.replay);
    this.records.push({
      v: 1,
      component_id: componentId,
      kind: report.kind,
      ...(report.name !== undefined ? { name: report.name } : {}),
      ordinal,
      path: [...path],
      request_hash: requestHash(report.request),
      status: report.error === undefined ? 'ok' : 'error',
      ...(report.result !== undefined ? { result: report.result } : {}),
      ...(report.error !== undefined ? { error: report.error } : {}),
      ...(report.replayed ? { replayed: true as const } : {}),
    });
  }

  /** The calls recorded after the first `count`, with what replaying them needs. */
  completedSince(count: number): CompletedCall[] {
    return this.records.slice(count).map((record, i) => {
      const replay = this.extras.get(count + i);
      return replay === undefined ? { record } : { record, replay };
    });
  }

  /** The next ordinal of a component at a path, counted whether or not the call is recorded. */
  private bump(componentId: string, path: readonly string[]): number {
    const key = callKey(componentId, path);
    const n = this.ordinals.get(key) ?? 0;
    this.ordinals.set(key, n + 1);
    return n;
  }
}

/** A stable hash of a JSON value: object keys sorted, so equal requests hash equal. */
export function requestHash(value: unknown): string {
  return createHash('sha256').update(stableJson(value)).digest('hex');
}

function stableJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
}

/** A component whose resumed batch did not make again a call it had recorded: it went another way from there. */
export interface ReplayDivergence {
  component_id: string;
  kind: CallKind;
  /** The ordinal of the first record left unanswered. */
  ordinal: number;
}

/**
 * The calls a batch completed before its turn was interrupted, answered again when the batch
 * runs anew. A call is matched by component, container path, kind and request hash, in the
 * order the records were made (calls made in parallel may have completed in another order).
 * A request that no record matches goes live; the records stay, for the calls still to come:
 * calls made in parallel (an Agent's tool calls, its sub-Agents' rounds) reach here in any
 * order, and one the earlier run never made (the call in flight, a call approved only now) must
 * not cost another that it did make a second call. A component that went another way (say its
 * model mapping changed) leaves records no request matched: `diverged` names the first of each.
 * A failed call's record is handed over too: the component knows whether its failure was final
 * (a tool's error told to the model) or may not be (a transient one), and then makes the call again.
 */
export class CallReplay implements CallSource {
  private readonly pending = new Map<string, CompletedCall[]>();
  replayed = 0;

  constructor(calls: readonly CompletedCall[]) {
    for (const call of calls) {
      const key = callKey(call.record.component_id, call.record.path);
      const list = this.pending.get(key);
      if (list) list.push(call);
      else this.pending.set(key, [call]);
    }
  }

  /** The record of this call, if the batch completed it before and `accept` takes it; undefined: make it. */
  take(componentId: string, path: readonly string[], call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept?: (call: CompletedCall) => boolean): CompletedCall | undefined {
    const key = callKey(componentId, path);
    const list = this.pending.get(key);
    if (!list || list.length === 0) return undefined;
    const hash = requestHash(call.request);
    const at = list.findIndex((c) => c.record.kind === call.kind && c.record.name === call.name && c.record.request_hash === hash);
    if (at < 0) return undefined;
    const [found] = list.splice(at, 1) as [CompletedCall];
    if (accept && !accept(found)) return undefined;
    this.replayed++;
    return found;
  }

  /** Per component (and path), the first record no request of the batch matched: where it went another way. */
  get diverged(): ReplayDivergence[] {
    return [...this.pending.values()].flatMap((list) => {
      const first = list[0];
      return first ? [{ component_id: first.record.component_id, kind: first.record.kind, ordinal: first.record.ordinal }] : [];
    });
  }
}

function callKey(componentId: string, path: readonly string[]): string {
  return `${componentId}\u0000${path.join('/')}`;
}
