/**
 * Listing sessions without reading their state: the sessions of a workflow (the listing index
 * finds them, their heads say what they are now) and the runs whose form timer is due (the
 * sparse timer index).
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { batchGetItems, call, isExpired, type StoreContext } from './dynamo';
import { keys, SESSION_HEAD_SK } from './item-keys';
import { HEAD_LISTING_ATTRIBUTES, HEAD_LISTING_NAMES, type SessionHead, toHead } from './sessions';
import { LISTING_INDEX, TIMER_INDEX } from './table';

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();

/** What a listing shows of a session: its head without the state. */
export type SessionSummary = Pick<SessionHead, 'id' | 'workflowId' | 'version' | 'status' | 'turn' | 'userId' | 'name' | 'createdAt' | 'updatedAt'>;

/**
 * Sessions of a workflow, newest first. The listing index gives their ids in creation order
 * (`userId` and the TTL filter there: neither changes with a turn); the heads, read in one
 * BatchGetItem a page, give status, turn and updated_at, which a turn changes without writing
 * the index (sessions.ts). `status` filters on the heads; `createdSince` (ISO) keeps the runs
 * created at or after it. No session state is read.
 */
export async function listSessions(
  ctx: StoreContext,
  tenant: string,
  workflowId: string,
  options: { limit: number; cursor?: Record<string, unknown>; userId?: string; status?: string; oldestFirst?: boolean; createdSince?: string },
): Promise<{ items: SessionSummary[]; cursor: Record<string, unknown> | undefined }> {
  const at = now(ctx);
  const filters = ['(attribute_not_exists(#ttl) OR #ttl > :now)'];
  const values: Record<string, unknown> = { ':pk': keys.sessionList(tenant, workflowId), ':now': Math.floor(at / 1000) };
  // the index sorts by creation time (`<created_at>#<id>`)
  if (options.createdSince !== undefined) values[':since'] = options.createdSince;
  if (options.userId !== undefined) {
    filters.push('user_id = :user');
    values[':user'] = options.userId;
  }
  const items: SessionSummary[] = [];
  let cursor = options.cursor;
  // a filter can leave a page short: read on until the page is full or the index ends
  do {
    const page = await call('list sessions', () =>
      ctx.doc.send(new QueryCommand({
        TableName: ctx.table,
        IndexName: LISTING_INDEX,
        KeyConditionExpression: options.createdSince === undefined ? 'gsi1pk = :pk' : 'gsi1pk = :pk AND gsi1sk >= :since',
        FilterExpression: filters.join(' AND '),
        ProjectionExpression: 'pk',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: values,
        ScanIndexForward: options.oldestFirst === true,
        Limit: options.limit - items.length,
        ExclusiveStartKey: cursor,
      })),
    );
    const listed = (page.Items ?? []).map((i) => i.pk as string);
    const heads = await batchGetItems(ctx, 'list sessions', listed.map((pk) => ({ pk, sk: SESSION_HEAD_SK })), {
      projection: `pk, ${HEAD_LISTING_ATTRIBUTES}, deleted_at`,
      names: HEAD_LISTING_NAMES,
      consistent: false,
    });
    const byPk = new Map(heads.map((h) => [h.pk as string, h]));
    for (const pk of listed) {
      const item = byPk.get(pk);
      // deleted or expired since the index was written
      if (!item || item.deleted_at !== undefined || isExpired(item, at)) continue;
      const { id, workflowId, version, status, turn, userId, name, createdAt, updatedAt } = toHead(item);
      if (options.status !== undefined && status !== options.status) continue;
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
