/**
 * How sessions' items look in the table: a turn record's parts (one compressed stream, in the
 * layouts records have been written in), the head item and what it lists, and the domain
 * shapes read back from them. sessions.ts reads and writes them; listings and replays read them.
 */
import { BLOB_THRESHOLD, decode, decodeParts, decompress, rawParts } from './codec';
import { keys, SESSION_HEAD_SK, turnFromSk } from './item-keys';
import type { SessionHead, TurnRecord } from './sessions';
import { runStatusOf } from './turn-slot';

/**
 * The parts of a turn record: one stream `z` (state `s`, history `h`, request `q`, response
 * `r` — or `R`, see responsePart —, calls `c`; deflate with the record dictionary), or, in
 * records written before it, the same parts as one brotli stream `p`, or before that an
 * attribute each. `blobs` must hold the wanted parts' blobs (`<part>b`).
 */
export function partsOf(item: Record<string, unknown>, wanted: readonly string[], blobs: ReadonlyMap<string, string>): Record<string, unknown> {
  if (item.z instanceof Uint8Array) {
    const parts = decodeParts(item.z, wanted.includes('r') ? [...wanted, 'R'] : wanted, blobs, 'dict1');
    if ('R' in parts) {
      parts.r = JSON.stringify(parts.R);
      delete parts.R;
    }
    return parts;
  }
  if (item.p instanceof Uint8Array) return decodeParts(item.p, wanted, blobs, 'brotli');
  const out: Record<string, unknown> = {};
  for (const part of wanted) if (item[part] instanceof Uint8Array) out[part] = decode(item[part] as Uint8Array, blobs);
  return out;
}

/**
 * The stored response body: kept as the parsed JSON (`R`) when that gives back the same bytes
 * — as JSON text inside JSON every quote would be escaped, a tenth more to compress — and it
 * is small enough to stay inline; else as the text (`r`), which a long body moves to a blob.
 */
export function responsePart(body: string): { R: unknown } | { r: string } {
  if (body.length > BLOB_THRESHOLD) return { r: body };
  try {
    const parsed: unknown = JSON.parse(body);
    if (JSON.stringify(parsed) === body) return { R: parsed };
  } catch {
    // not JSON: kept as it is
  }
  return { r: body };
}

/**
 * When a session idle since `atMs` expires: its TTL, and a tenth of it (at most a day) more.
 * The head's TTL is projected into the listing index, so moving it writes an index entry; with
 * the slack it moves only once a session has less than a full TTL left (`expiryDue`) — about
 * once per slack for a session in use — instead of with every head update, and a session still
 * never expires sooner than its TTL after its last turn.
 */
export function sessionExpiry(atMs: number, ttlSeconds: number): number {
  return Math.floor(atMs / 1000) + ttlSeconds + ttlSlack(ttlSeconds);
}

/** Whether a head expiring at `expiresAt` (epoch s) must move at `atMs`: under a TTL left, or more than TTL and slack (the TTL was shortened). */
export function expiryDue(expiresAt: number, atMs: number, ttlSeconds: number): boolean {
  const left = expiresAt - Math.floor(atMs / 1000);
  return left < ttlSeconds || left > ttlSeconds + ttlSlack(ttlSeconds);
}

const ttlSlack = (ttlSeconds: number) => Math.min(86_400, Math.ceil(ttlSeconds / 10));

/**
 * Every part of a turn record, parsed, blob references left in place (codec `revive` fills
 * them in): a reader that wants a piece of a part reads only the blobs that piece needs.
 * Records that keep an attribute per part are read for the parts `wanted`.
 */
export function rawPartsOf(item: Record<string, unknown>, wanted: readonly string[]): Record<string, unknown> {
  if (item.z instanceof Uint8Array) return rawParts(item.z, 'dict1');
  if (item.p instanceof Uint8Array) return rawParts(item.p, 'brotli');
  const out: Record<string, unknown> = {};
  for (const part of wanted) if (item[part] instanceof Uint8Array) out[part] = JSON.parse(decompress(item[part] as Uint8Array));
  return out;
}

/** A turn record's state as stored (see rawPartsOf): for a short value of it without its blobs. */
export function rawStateOf(item: Record<string, unknown>): Record<string, unknown> | undefined {
  const state = rawPartsOf(item, ['s']).s;
  return state !== null && typeof state === 'object' ? (state as Record<string, unknown>) : undefined;
}

export function headItem(h: SessionHead): Record<string, unknown> {
  return {
    pk: keys.session(h.tenant, h.id),
    sk: SESSION_HEAD_SK,
    kind: 'session',
    id: h.id,
    tenant: h.tenant,
    workflow_id: h.workflowId,
    version: h.version,
    st: h.status,
    tn: h.turn,
    user_id: h.userId ?? undefined,
    ...(h.dialect ? { dl: h.dialect } : {}),
    ...(h.source ? { src: h.source } : {}),
    ...(h.name ? { name: h.name } : {}),
    created_at: h.createdAt,
    ua: h.updatedAt,
    ttl: h.expiresAt,
    gsi1pk: keys.sessionList(h.tenant, h.workflowId),
    gsi1sk: `${h.createdAt}#${h.id}`,
    ...(h.dueAt != null ? { due_at: h.dueAt, gsi2pk: 'DUE', gsi2sk: dueSortKey(h.dueAt, h.tenant, h.id) } : {}),
    ...(h.keyHash ? { ik: h.keyHash } : {}),
    ...(h.fingerprint ? { fp: h.fingerprint } : {}),
    ...(h.forkedFrom ? { ff: { r: h.forkedFrom.runId, n: h.forkedFrom.turn } } : {}),
  };
}

/** What a head item lists, in either layout (see the top of this file). */
function listedOf(item: Record<string, unknown>): { status: string; turn: number; updatedAt: string } {
  return {
    status: (item.st ?? item.status) as string,
    turn: (item.tn ?? item.turn) as number,
    updatedAt: (item.ua ?? item.updated_at) as string,
  };
}

/** The head's attributes a reader of a session's listing and identity needs (a ProjectionExpression; `#status`, `#turn`, `#ttl` named). */
export const HEAD_LISTING_ATTRIBUTES = 'tenant, id, workflow_id, version, st, tn, ua, #status, #turn, updated_at, user_id, dl, src, #name, created_at, #ttl, due_at';
export const HEAD_LISTING_NAMES = { '#status': 'status', '#turn': 'turn', '#ttl': 'ttl', '#name': 'name' } as const;

export function toHead(item: Record<string, unknown>): SessionHead {
  const listed = listedOf(item);
  return {
    tenant: item.tenant as string,
    id: item.id as string,
    workflowId: item.workflow_id as string,
    version: item.version as number,
    status: listed.status,
    turn: listed.turn,
    userId: (item.user_id as string | undefined) ?? null,
    ...(item.dl === 'ragflow' ? { dialect: 'ragflow' as const } : {}),
    ...(item.src === 'workflow' ? { source: 'workflow' as const } : {}),
    ...(typeof item.name === 'string' ? { name: item.name } : {}),
    createdAt: item.created_at as string,
    updatedAt: listed.updatedAt,
    expiresAt: item.ttl as number,
    claim: null,
    dueAt: typeof item.due_at === 'number' ? item.due_at : null,
    listedStatus: listed.status,
    ...(typeof item.ik === 'string' ? { keyHash: item.ik } : {}),
    ...(typeof item.fp === 'string' ? { fingerprint: item.fp } : {}),
    ...(isForkLink(item.ff) ? { forkedFrom: { runId: item.ff.r, turn: item.ff.n } } : {}),
  };
}

function isForkLink(v: unknown): v is { r: string; n: number } {
  return typeof v === 'object' && v !== null && typeof (v as { r?: unknown }).r === 'string' && typeof (v as { n?: unknown }).n === 'number';
}

export function dueSortKey(dueAt: number, tenant: string, id: string): string {
  return `${String(dueAt).padStart(15, '0')}#${tenant}#${id}`;
}

export function toTurn(item: Record<string, unknown>): TurnRecord {
  return {
    turn: turnFromSk(item.sk as string),
    status: item.status as string,
    runStatus: runStatusOf(item),
    createdAt: item.created_at as string,
    committedBy: item.committed_by as string,
    keyHash: (item.ik as string | undefined) ?? null,
    fingerprint: (item.fp as string | undefined) ?? null,
  };
}
