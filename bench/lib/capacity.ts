/**
 * What DynamoDB calls cost, two ways: as DynamoDB reports it (ReturnConsumedCapacity) and as
 * computed from the items' sizes by AWS's rules (a write is charged on the larger of the item
 * before and after it, per KB started, plus every index entry it changes; a transaction twice;
 * a read per 4 KB). `meter` decorates a DocumentClient's `send`; a second, unmetered client reads
 * each written item before and after the write.
 */
import { GetCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { itemSize } from '../../lib/store/blobs';
import { keys } from '../../lib/store/item-keys';
import { TABLE_DEFINITION } from '../../lib/store/table';
import type { Database } from './stack';

/** Write units of an item: one per KB started. */
export const kb = (bytes: number) => Math.ceil(bytes / 1024);
/** Read units of `bytes` read: one per 4 KB started, half for an eventually consistent read. */
export const rcu = (bytes: number, consistent: boolean) => Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);

interface IndexDefinition {
  KeySchema: { AttributeName: string }[];
  Projection: { ProjectionType: string; NonKeyAttributes?: string[] };
}

const TABLE_KEYS = TABLE_DEFINITION.KeySchema.map((k) => k.AttributeName);
const INDEXES = (TABLE_DEFINITION.GlobalSecondaryIndexes as readonly IndexDefinition[]).map((index) => ({
  keys: index.KeySchema.map((k) => k.AttributeName),
  attributes: [...TABLE_KEYS, ...index.KeySchema.map((k) => k.AttributeName), ...(index.Projection.NonKeyAttributes ?? [])],
}));

/** The item's entry in an index, if it has one there. */
function indexEntry(index: (typeof INDEXES)[number], item: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!item || index.keys.some((k) => item[k] === undefined)) return undefined;
  return Object.fromEntries(index.attributes.filter((a) => item[a] !== undefined).map((a) => [a, item[a]]));
}

/** Index write units of a table write from `before` to `after` (DynamoDB's rules for a GSI), over every index. */
export function indexUnits(before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined): number {
  let units = 0;
  for (const index of INDEXES) {
    const a = indexEntry(index, before);
    const b = indexEntry(index, after);
    if (!a && !b) continue;
    if (!a) units += kb(itemSize(b as Record<string, unknown>));
    else if (!b) units += kb(itemSize(a));
    else if (index.keys.some((k) => a[k] !== b[k])) units += kb(itemSize(a)) + kb(itemSize(b));
    else if (JSON.stringify(a) !== JSON.stringify(b)) units += kb(Math.max(itemSize(a), itemSize(b)));
  }
  return units;
}

export interface Meter {
  wcuReported: number;
  wcuFromSizes: number;
  rcuReported: number;
  rcuFromSizes: number;
  bytesWritten: number;
  roundTrips: number;
  /** Per call: operation, units reported / from sizes, bytes of the item. */
  calls: string[];
}

export const emptyMeter = (): Meter => ({ wcuReported: 0, wcuFromSizes: 0, rcuReported: 0, rcuFromSizes: 0, bytesWritten: 0, roundTrips: 0, calls: [] });

/** Decorates `doc.send`: consumed capacity as reported, and as computed from the items. */
export function meter(doc: DynamoDBDocumentClient, side: DynamoDBDocumentClient, table: string): { take(): Meter } {
  let current = emptyMeter();
  const original = doc.send.bind(doc) as (command: unknown) => Promise<any>;
  const read = async (key: unknown) =>
    (await side.send(new GetCommand({ TableName: table, Key: key as Record<string, unknown>, ConsistentRead: true }))).Item;
  (doc as unknown as { send: typeof original }).send = async (command: unknown) => {
    const name = (command as object).constructor.name;
    const input = (command as { input: any }).input;
    // a write is charged on the larger of the item before and after it (a Put may replace a claim)
    const before = name === 'UpdateCommand' || name === 'DeleteCommand' ? await read(input.Key)
      : name === 'PutCommand' ? await read({ pk: input.Item.pk, sk: input.Item.sk }) : undefined;
    const m = current;
    m.roundTrips++;
    let out: any;
    try {
      out = await original(command);
    } catch (error) {
      // refused (a condition, a throttle): a round trip, whose capacity the error does not say
      m.calls.push(`${name.replace(/Command$/, '')} refused`);
      throw error;
    }
    const consumed = [out?.ConsumedCapacity ?? []].flat() as { CapacityUnits?: number }[];
    const units = consumed.reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
    const was = { w: m.wcuFromSizes + m.rcuFromSizes, b: m.bytesWritten };
    switch (name) {
      case 'PutCommand': {
        m.wcuReported += units;
        m.wcuFromSizes += kb(Math.max(itemSize(input.Item), before ? itemSize(before) : 0)) + indexUnits(before, input.Item);
        m.bytesWritten += itemSize(input.Item);
        break;
      }
      case 'DeleteCommand': {
        m.wcuReported += units;
        m.wcuFromSizes += before ? kb(itemSize(before)) + indexUnits(before, undefined) : 1;
        break;
      }
      case 'TransactWriteCommand': {
        // a transaction is charged twice the size of each item it writes
        m.wcuReported += units;
        for (const t of input.TransactItems as { Put?: { Item: Record<string, unknown> } }[]) {
          if (t.Put) {
            m.wcuFromSizes += 2 * kb(itemSize(t.Put.Item)) + indexUnits(undefined, t.Put.Item);
            m.bytesWritten += itemSize(t.Put.Item);
          }
        }
        break;
      }
      case 'UpdateCommand': {
        const after = await read(input.Key);
        m.wcuReported += units;
        m.wcuFromSizes += kb(Math.max(before ? itemSize(before) : 0, after ? itemSize(after) : 0)) + indexUnits(before, after);
        m.bytesWritten += after ? itemSize(after) : 0;
        break;
      }
      case 'BatchWriteCommand': {
        m.wcuReported += units;
        for (const r of input.RequestItems[table] ?? []) {
          if (r.PutRequest) {
            m.wcuFromSizes += kb(itemSize(r.PutRequest.Item));
            m.bytesWritten += itemSize(r.PutRequest.Item);
          } else m.wcuFromSizes += 1;
        }
        break;
      }
      case 'QueryCommand': {
        m.rcuReported += units;
        m.rcuFromSizes += rcu((out.Items ?? []).reduce((n: number, i: Record<string, unknown>) => n + itemSize(i), 0), input.ConsistentRead === true);
        break;
      }
      case 'GetCommand': {
        m.rcuReported += units;
        m.rcuFromSizes += rcu(out.Item ? itemSize(out.Item) : 0, input.ConsistentRead === true);
        break;
      }
      case 'BatchGetCommand': {
        m.rcuReported += units;
        // every key asked for is charged, found or not (at least half a unit each)
        const consistent = input.RequestItems[table]?.ConsistentRead === true;
        const found = new Map((out.Responses?.[table] ?? []).map((i: Record<string, unknown>) => [`${i.pk}\u0000${i.sk}`, i]));
        for (const k of input.RequestItems[table]?.Keys ?? []) {
          const item = found.get(`${k.pk}\u0000${k.sk}`) as Record<string, unknown> | undefined;
          m.rcuFromSizes += rcu(item ? itemSize(item) : 0, consistent);
        }
        break;
      }
      default:
        m.wcuReported += units;
    }
    const op = name.replace(/Command$/, '');
    const bytes = m.bytesWritten - was.b;
    m.calls.push(`${op} ${units}/${m.wcuFromSizes + m.rcuFromSizes - was.w}${bytes ? ` (${bytes} B)` : ''}`);
    return out;
  };
  return {
    take() {
      const used = current;
      current = emptyMeter();
      return used;
    },
  };
}

/** Every item of a session partition (the cleanup consumer deletes all but its head). */
export async function partitionItems(db: Database, tenant: string, runId: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db.doc.send(new QueryCommand({ TableName: db.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) }, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}
