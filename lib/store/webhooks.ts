/**
 * Workflows' webhooks: where an HTTP delivery that names no tenant finds one.
 *
 * - `HOOK#<id>` / `H`: the opaque id of a workflow's webhook URL -> its tenant and workflow.
 * - `HOOKWF#<workflow id>` / `H`: the same for RAGFlow's path, `/api/v1/agents/{id}/webhook`,
 *   which names the workflow alone. Workflow ids are generated (never chosen by a client), so
 *   one belongs to one tenant; should two tenants hold the same id anyway, the first keeps the
 *   path and the other's webhook answers at its opaque URL only.
 * - the workflow's head keeps the id (`webhook_id`), so reading the workflow shows its URL.
 *
 * All three are written once per workflow, in one transaction; the id never changes after.
 */
import { randomBytes } from 'node:crypto';
import { GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, type StoreContext } from './dynamo';
import { StoreUnavailableError } from './errors';
import { keys } from './item-keys';
import { getWorkflow } from './workflows';

export interface Webhook {
  /** `wh_` and 32 hex digits (128 random bits). */
  id: string;
  tenant: string;
  workflowId: string;
  createdAt: string;
}

export const WEBHOOK_ID = /^wh_[0-9a-f]{32}$/;
const SK = 'H';

/** The webhook of an opaque id, or null. */
export async function getWebhook(ctx: StoreContext, id: string): Promise<Webhook | null> {
  if (!WEBHOOK_ID.test(id)) return null;
  const { Item } = await call('read the webhook', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.webhook(id), sk: SK } })));
  return Item ? { id, tenant: Item.tenant as string, workflowId: Item.workflow_id as string, createdAt: Item.created_at as string } : null;
}

/** The webhook RAGFlow's path names by the workflow's id, or null. */
export async function webhookOfWorkflow(ctx: StoreContext, workflowId: string): Promise<Webhook | null> {
  const { Item } = await call('read the webhook', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.webhookOfWorkflow(workflowId), sk: SK } })));
  return Item ? { id: Item.id as string, tenant: Item.tenant as string, workflowId, createdAt: Item.created_at as string } : null;
}

/** The workflow's webhook id, made on the first call (NotFoundError for a missing workflow). */
export async function ensureWebhook(ctx: StoreContext, tenant: string, workflowId: string): Promise<string> {
  let withAlias = true;
  for (let attempt = 0; attempt < 4; attempt++) {
    const workflow = await getWorkflow(ctx, tenant, workflowId);
    if (workflow.webhookId) return workflow.webhookId;
    const id = `wh_${randomBytes(16).toString('hex')}`;
    const at = new Date((ctx.now ?? Date.now)()).toISOString();
    const item = { sk: SK, kind: 'webhook', tenant, workflow_id: workflowId, created_at: at };
    const writes = [
      { Put: { TableName: ctx.table, Item: { pk: keys.webhook(id), ...item }, ConditionExpression: 'attribute_not_exists(pk)' } },
      {
        Update: {
          TableName: ctx.table,
          Key: { pk: keys.workflow(tenant, workflowId), sk: 'W' },
          UpdateExpression: 'SET webhook_id = :id',
          ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(webhook_id)',
          ExpressionAttributeValues: { ':id': id },
        },
      },
      ...(withAlias
        ? [{
            Put: {
              TableName: ctx.table,
              Item: { pk: keys.webhookOfWorkflow(workflowId), id, ...item },
              ConditionExpression: 'attribute_not_exists(pk) OR (tenant = :t AND workflow_id = :w)',
              ExpressionAttributeValues: { ':t': tenant, ':w': workflowId },
            },
          }]
        : []),
    ];
    try {
      await call('make the webhook', () => ctx.doc.send(new TransactWriteCommand({ TransactItems: writes })));
      return id;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
      // another tenant's workflow of the same id holds RAGFlow's path: the opaque URL only
      if (error.index === 2) withAlias = false;
      // otherwise a concurrent first call made it (read it), or the id was taken (draw again)
    }
  }
  throw new StoreUnavailableError('the webhook could not be made; retry');
}
