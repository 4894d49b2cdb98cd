/** Per-tenant settings: the webhook signing secret, made on first use and kept. */
import { randomBytes } from 'node:crypto';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, type StoreContext } from './dynamo';
import { keys } from './item-keys';

const KEY = (tenant: string) => ({ pk: keys.tenant(tenant), sk: 'WEBHOOK_SECRET' });

export async function webhookSecret(ctx: StoreContext, tenant: string): Promise<string> {
  const { Item } = await call('read the webhook secret', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: KEY(tenant), ConsistentRead: true })));
  if (Item) return Item.secret as string;
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  try {
    await call('store the webhook secret', () =>
      ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: { ...KEY(tenant), kind: 'webhook_secret', secret }, ConditionExpression: 'attribute_not_exists(pk)' })),
    );
    return secret;
  } catch (error) {
    // created by a concurrent first use: take theirs
    if (error instanceof ConditionFailed) return webhookSecret(ctx, tenant);
    throw error;
  }
}
