/**
 * Listing sessions without reading their state: the sessions of a workflow (the listing index,
 * which holds each head's listed attributes) and the runs whose form timer is due (the sparse
 * timer index).
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { call, type StoreContext } from './dynamo';
import { keys } from './item-keys';
import { type SessionHead, toHead } from './sessions';
import { LISTING_INDEX, TIMER_INDEX } from './table';

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();

/** What the listing index holds of a session: its head without the state. */
export type SessionSummary = Pick<SessionHead, 'id' | 'workflowId' | 'version' | 'status' | 'turn' | 'userId' | 'name' | 'createdAt' | 'updatedAt'>;

/**
 * Sessions of a workflow, newest first, from the listing index: no session state is read.
 * `userId` filters on the projected attribute.
 */
export async function listSessions(
  ctx: StoreContext,
  tenant: string,
  workflowId: string,
  options: { limit: number; cursor?: Record<string, unknown>; userId?: string; status?: string; oldestFirst?: boolean },
): Promise<{ items: SessionSummary[]; cursor: Record<string, unknown> | undefined }> {
  const nowSec = Math.floor(now(ctx) / 1000);
  const filters = ['(attribute_not_exists(#ttl) OR #ttl > :now)'];
  const values: Record<string, unknown> = { ':pk': keys.sessionList(tenant, workflowId), ':now': nowSec };
  if (options.userId !== undefined) {
    filters.push('user_id = :user');
    values[':user'] = options.userId;
  }
  if (options.status !== undefined) {
    filters.push('#status = :status');
    values[':status'] = options.status;
  }
  const items: SessionSummary[] = [];
  let cursor = options.cursor;
  // a filter can leave a page short: read on until the page is full or the index ends
  do {
    const page = await call('list sessions', () =>
      ctx.doc.send(new QueryCommand({
        TableName: ctx.table,
        IndexName: LISTING_INDEX,
        KeyConditionExpression: 'gsi1pk = :pk',
        FilterExpression: filters.join(' AND '),
        ExpressionAttributeNames: { '#ttl': 'ttl', ...(options.status !== undefined ? { '#status': 'status' } : {}) },
        ExpressionAttributeValues: values,
        ScanIndexForward: options.oldestFirst === true,
        Limit: options.limit - items.length,
        ExclusiveStartKey: cursor,
      })),
    );
    for (const i of page.Items ?? []) {
      const { id, workflowId, version, status, turn, userId, name, createdAt, updatedAt } = toHead(i);
      items.push({ id, workflowId, version, status, turn, userId, ...(name !== undefined ? { name } : {}), createdAt, updatedAt });
    }
    cursor = page.LastEvaluatedKey;
  } while (cursor && items.length < options.limit);
  return { items, cursor };
}

/** Runs whose form timer is due at `nowMs`, oldest first, from the sparse timer index. */
export async function listDueRuns(ctx: StoreContext, nowMs: number, limit: number): Promise<{ tenant: string; id: string }[]> {
  const { Items = [] } = await call('list due timers', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      IndexName: TIMER_INDEX,
      KeyConditionExpression: 'gsi2pk = :due AND gsi2sk <= :now',
      ExpressionAttributeValues: { ':due': 'DUE', ':now': `${String(nowMs).padStart(15, '0')}#~` },
      Limit: limit,
    })),
  );
  return Items.map((i) => {
    const m = /^T#([^#]+)#S#([0-9a-f]{32})$/.exec(i.pk as string);
    return m ? { tenant: m[1] as string, id: m[2] as string } : undefined;
  }).filter((r): r is { tenant: string; id: string } => r !== undefined);
}
