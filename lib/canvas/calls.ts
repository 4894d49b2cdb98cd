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
}

/** What a component reports of one call. */
export interface CallReport {
  kind: CallKind;
  name?: string;
  /** The request as the component built it, with secrets still as `{secret.NAME}` references. */
  request: unknown;
  result?: unknown;
  error?: string;
}

/** @default bound of recorded calls per turn */
export const MAX_CALLS_PER_TURN = 500;

/** The calls of one turn, in order, bounded. */
export class CallLog {
  readonly records: CallRecord[];
  dropped: number;
  private readonly ordinals = new Map<string, number>();

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
    });
  }

  /** The next ordinal of a component at a path, counted whether or not the call is recorded. */
  private bump(componentId: string, path: readonly string[]): number {
    const key = `${componentId}\u0000${path.join('/')}`;
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
