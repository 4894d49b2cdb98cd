/**
 * Thin wrappers over the document client: every SDK failure that is not a condition becomes
 * `StoreUnavailableError` (transient: the turn commits nothing and can be retried), and a
 * failed condition becomes `ConditionFailed` carrying the item as it was.
 */
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, type DynamoDBDocumentClient, QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import { StoreUnavailableError } from './errors';

export interface StoreContext {
  doc: DynamoDBDocumentClient;
  table: string;
  /** Epoch ms. @default Date.now */
  now?: () => number;
  /** Told the capacity every call consumed (asks DynamoDB for it); for tests and benchmarks. */
  onCapacity?: (operation: string, units: { read: number; write: number }) => void;
}

/** The parameter that asks DynamoDB to report consumed capacity, when someone listens. */
export function capacityParam(ctx: StoreContext): { ReturnConsumedCapacity?: 'TOTAL' } {
  return ctx.onCapacity ? { ReturnConsumedCapacity: 'TOTAL' } : {};
}

type Consumed = { CapacityUnits?: number };

/** Passes a response's ConsumedCapacity (one or a list) to the listener. */
export function reportCapacity(
  ctx: StoreContext,
  operation: string,
  kind: 'read' | 'write',
  consumed: Consumed | Consumed[] | undefined,
): void {
  if (!ctx.onCapacity || !consumed) return;
  let units = 0;
  for (const c of Array.isArray(consumed) ? consumed : [consumed]) units += c.CapacityUnits ?? 0;
  ctx.onCapacity(operation, kind === 'read' ? { read: units, write: 0 } : { read: 0, write: units });
}

/**
 * Whether an item's TTL has passed. DynamoDB deletes expired items up to days late, so every read
 * that honours a TTL checks it itself.
 */
export function isExpired(item: Record<string, unknown>, atMs: number): boolean {
  return typeof item.ttl === 'number' && item.ttl <= Math.floor(atMs / 1000);
}

export class ConditionFailed extends Error {
  constructor(
    readonly item: Record<string, unknown> | undefined,
    /** In a transaction: the position of the action whose condition failed. */
    readonly index?: number,
  ) {
    super('condition failed');
  }
}

/** Runs one DynamoDB call, translating its failures. */
export async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) {
      throw new ConditionFailed(error.Item ? unmarshallLoose(error.Item) : undefined);
    }
    const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []) : [];
    const failed = reasons.findIndex((r) => r.Code === 'ConditionalCheckFailed');
    if (failed >= 0) {
      const item = reasons[failed]?.Item;
      throw new ConditionFailed(item ? unmarshallLoose(item) : undefined, failed);
    }
    throw new StoreUnavailableError(`the store could not ${what}: ${(error as Error).name ?? 'error'}`, { cause: error });
  }
}

/**
 * Every item a query matches, page after page. `operation` names it for the capacity listener
 * (when given, consumed capacity is asked for and reported as reads).
 */
export async function queryAll(
  ctx: StoreContext,
  what: string,
  input: Omit<QueryCommandInput, 'TableName' | 'ExclusiveStartKey'>,
  operation?: string,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await call(what, () =>
      ctx.doc.send(new QueryCommand({ ...input, TableName: ctx.table, ExclusiveStartKey: start, ...(operation ? capacityParam(ctx) : {}) })),
    );
    if (operation) reportCapacity(ctx, operation, 'read', page.ConsumedCapacity);
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

export interface BatchGetOptions {
  /** A ProjectionExpression; absent: whole items. */
  projection?: string;
  names?: Record<string, string>;
  /** @default true */
  consistent?: boolean;
  /** Names the reads for the capacity listener (absent: `what`). */
  operation?: string;
  /** Calls per 100 keys before giving up with StoreUnavailableError (keys still unprocessed). @default 10 */
  attempts?: number;
}

/**
 * The items at `keys` that exist, in no particular order: 100 keys a BatchGetItem (each key
 * asked once), keys DynamoDB left unprocessed asked again after a backoff, a bounded number of
 * times (then StoreUnavailableError: transient, as any other failure of the store).
 */
export async function batchGetItems(
  ctx: StoreContext,
  what: string,
  keys: readonly { pk: string; sk: string }[],
  options: BatchGetOptions = {},
): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  const unique = [...new Map(keys.map((k) => [`${k.pk}\u0000${k.sk}`, k])).values()];
  for (let i = 0; i < unique.length; i += 100) {
    let pending: Record<string, unknown>[] = unique.slice(i, i + 100);
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= (options.attempts ?? 10)) throw new StoreUnavailableError(`the store could not ${what}: keys left unprocessed`);
      if (attempt > 0) await backoff(attempt - 1);
      const request = {
        Keys: pending,
        ConsistentRead: options.consistent ?? true,
        ...(options.projection ? { ProjectionExpression: options.projection } : {}),
        ...(options.names ? { ExpressionAttributeNames: options.names } : {}),
      };
      const res = await call(what, () => ctx.doc.send(new BatchGetCommand({ RequestItems: { [ctx.table]: request }, ...capacityParam(ctx) })));
      reportCapacity(ctx, options.operation ?? what, 'read', res.ConsumedCapacity);
      out.push(...(res.Responses?.[ctx.table] ?? []));
      pending = (res.UnprocessedKeys?.[ctx.table]?.Keys ?? []) as Record<string, unknown>[];
    }
  }
  return out;
}

/** Waits before asking DynamoDB again for what it left unprocessed: jittered, growing, at most 1 s. */
export function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(1000, 20 * 2 ** attempt) * Math.random()));
}

/** ALL_OLD images on a failed condition come back in attribute-value form. */
function unmarshallLoose(item: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) out[k] = valueOf(v as Record<string, unknown>);
  return out;
}

function valueOf(av: Record<string, unknown>): unknown {
  if ('S' in av) return av.S;
  if ('N' in av) return Number(av.N);
  if ('BOOL' in av) return av.BOOL;
  if ('B' in av) return av.B;
  if ('SS' in av) return av.SS;
  if ('NULL' in av) return null;
  // lists and maps (a claim's queued inputs: lib/store/inbox.ts)
  if ('L' in av && Array.isArray(av.L)) return av.L.map((e) => valueOf(e as Record<string, unknown>));
  if ('M' in av && typeof av.M === 'object' && av.M !== null) return unmarshallLoose(av.M as Record<string, unknown>);
  return av;
}
