/**
 * Workflows and their immutable numbered versions. The head `W` holds the name, RAGFlow's
 * canvas type, category and tags, the active and latest version numbers; each version `V#<n>`
 * holds its DSL (compressed). Creating a version and moving the pointer happen in one
 * transaction.
 */
import { GetCommand, QueryCommand, TransactWriteCommand, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { decode, encode } from './codec';
import { batchGetItems, call, ConditionFailed, queryAll, type StoreContext } from './dynamo';
import { EaselError } from '../errors';
import { NotFoundError, StoreUnavailableError } from './errors';
import { keys } from './item-keys';
import { deleteReplays } from './replays';
import { LISTING_INDEX } from './table';

export interface Workflow {
  tenant: string;
  id: string;
  name: string;
  description: string;
  /** RAGFlow's `canvas_type` (a template's shelf: "Agent", "Customer Support", ...); null when none was given. */
  canvasType: string | null;
  /** RAGFlow's `canvas_category`: `agent_canvas` (the default) or `dataflow_canvas`. */
  canvasCategory: string;
  /** RAGFlow's agent tags, in their order. */
  tags: string[];
  activeVersion: number;
  latestVersion: number;
  deleted: boolean;
  createdAt: string;
  updatedAt: string;
  /** Its webhook's opaque id, once a version in webhook mode was imported (store/webhooks.ts). */
  webhookId?: string;
  /**
   * Settings of the workflow, whatever its version (lib/turns/on-busy.ts reads `on_busy`), as
   * stored: an Easel setting, not part of the RAGFlow DSL, so DSLs import and export unchanged.
   */
  settings: Record<string, unknown>;
}

/** The category a workflow has unless it says otherwise (RAGFlow's). */
export const DEFAULT_CANVAS_CATEGORY = 'agent_canvas';

const iso = (ctx: StoreContext) => new Date((ctx.now ?? Date.now)()).toISOString();

export interface NewWorkflow {
  tenant: string;
  id: string;
  name: string;
  description?: string;
  canvasType?: string | null;
  /** @default "agent_canvas" */
  canvasCategory?: string;
  dsl: unknown;
  settings?: Record<string, unknown>;
}

export async function createWorkflow(ctx: StoreContext, w: NewWorkflow): Promise<Workflow> {
  const at = iso(ctx);
  const workflow: Workflow = {
    tenant: w.tenant,
    id: w.id,
    name: w.name,
    description: w.description ?? '',
    canvasType: w.canvasType ?? null,
    canvasCategory: w.canvasCategory ?? DEFAULT_CANVAS_CATEGORY,
    tags: [],
    activeVersion: 1,
    latestVersion: 1,
    deleted: false,
    createdAt: at,
    updatedAt: at,
    settings: w.settings ?? {},
  };
  const pk = keys.workflow(w.tenant, w.id);
  await call('create the workflow', () =>
    ctx.doc.send(new TransactWriteCommand({
      TransactItems: [
        {
          Put: {
            TableName: ctx.table,
            Item: {
              pk,
              sk: 'W',
              kind: 'workflow',
              id: w.id,
              tenant: w.tenant,
              name: w.name,
              description: workflow.description,
              ...(workflow.canvasType !== null ? { canvas_type: workflow.canvasType } : {}),
              canvas_category: workflow.canvasCategory,
              ...(Object.keys(workflow.settings).length > 0 ? { settings: workflow.settings } : {}),
              active_version: 1,
              latest_version: 1,
              deleted: false,
              created_at: at,
              updated_at: at,
              gsi1pk: keys.workflowList(w.tenant),
              gsi1sk: `${at}#${w.id}`,
            },
            ConditionExpression: 'attribute_not_exists(pk)',
          },
        },
        { Put: { TableName: ctx.table, Item: versionItem(pk, 1, w.dsl, at) } },
      ],
    })),
  );
  return workflow;
}

const MAX_VERSION_ATTEMPTS = 10;

/** Adds version latest+1; `activate` moves the active pointer to it in the same write. */
export async function addVersion(ctx: StoreContext, tenant: string, id: string, dsl: unknown, activate: boolean): Promise<number> {
  const pk = keys.workflow(tenant, id);
  // a concurrent writer that took our number makes us try on top of theirs; a deletion ends it
  for (let attempt = 1; ; attempt++) {
    const current = await getWorkflow(ctx, tenant, id);
    if (current.deleted) throw new NotFoundError('workflow');
    const next = current.latestVersion + 1;
    const at = iso(ctx);
    try {
      await call('add the version', () =>
        ctx.doc.send(new TransactWriteCommand({
          TransactItems: [
            {
              Update: {
                TableName: ctx.table,
                Key: { pk, sk: 'W' },
                UpdateExpression: `SET latest_version = :next, updated_at = :at${activate ? ', active_version = :next' : ''}`,
                ConditionExpression: 'latest_version = :cur AND deleted = :no',
                ExpressionAttributeValues: { ':next': next, ':cur': current.latestVersion, ':at': at, ':no': false },
              },
            },
            { Put: { TableName: ctx.table, Item: versionItem(pk, next, dsl, at), ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        })),
      );
      return next;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
      if (attempt >= MAX_VERSION_ATTEMPTS) throw new StoreUnavailableError('too many concurrent version adds; retry');
    }
  }
}

export async function activateVersion(ctx: StoreContext, tenant: string, id: string, version: number): Promise<void> {
  await updateWorkflowItem(ctx, tenant, id, 'activate the version', 'workflow version', {
    UpdateExpression: 'SET active_version = :v, updated_at = :at',
    ConditionExpression: 'attribute_exists(pk) AND latest_version >= :v AND deleted = :no',
    ExpressionAttributeValues: { ':v': version, ':at': iso(ctx), ':no': false },
  });
}

export async function getWorkflow(ctx: StoreContext, tenant: string, id: string): Promise<Workflow> {
  const { Item } = await call('read the workflow', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.workflow(tenant, id), sk: 'W' }, ConsistentRead: true })),
  );
  if (!Item) throw new NotFoundError('workflow');
  return toWorkflow(Item);
}

/** A version's DSL. Versions are immutable, so callers may cache the result forever. */
export async function getVersion(ctx: StoreContext, tenant: string, id: string, version: number): Promise<unknown> {
  const { Item } = await call('read the workflow version', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.workflow(tenant, id), sk: keys.version(version) } })),
  );
  if (!Item) throw new NotFoundError('workflow version');
  return decode(Item.dsl as Uint8Array, new Map());
}

/** What `updateWorkflow` may change; an absent field is left as it is. */
export interface WorkflowChanges {
  name?: string;
  description?: string;
  canvasType?: string | null;
  canvasCategory?: string;
  tags?: string[];
  /** Replaces the settings whole. */
  settings?: Record<string, unknown>;
}

const ATTRIBUTE_OF: Record<keyof WorkflowChanges, string> = { name: 'name', description: 'description', canvasType: 'canvas_type', canvasCategory: 'canvas_category', tags: 'tags', settings: 'settings' };

/** Renames, redescribes, retypes or retags a workflow; its versions are untouched. */
export async function updateWorkflow(ctx: StoreContext, tenant: string, id: string, changes: WorkflowChanges): Promise<void> {
  const sets = ['updated_at = :at'];
  const removes: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':at': iso(ctx), ':no': false };
  for (const [field, attribute] of Object.entries(ATTRIBUTE_OF) as [keyof WorkflowChanges, string][]) {
    const value = changes[field];
    if (value === undefined) continue;
    names[`#${field}`] = attribute;
    if (value === null) removes.push(`#${field}`);
    else {
      sets.push(`#${field} = :${field}`);
      values[`:${field}`] = value;
    }
  }
  await updateWorkflowItem(ctx, tenant, id, 'update the workflow', 'workflow', {
    UpdateExpression: `SET ${sets.join(', ')}${removes.length > 0 ? ` REMOVE ${removes.join(', ')}` : ''}`,
    ConditionExpression: 'attribute_exists(pk) AND deleted = :no',
    ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
    ExpressionAttributeValues: values,
  });
}

/**
 * Which of `ids` the tenant has no live workflow for (missing, deleted, or another tenant's),
 * each once, in the order given. One batch read per 100 ids.
 */
export async function missingWorkflows(ctx: StoreContext, tenant: string, ids: readonly string[]): Promise<string[]> {
  const unique = [...new Set(ids)];
  const items = await batchGetItems(ctx, 'read the workflows', unique.map((id) => ({ pk: keys.workflow(tenant, id), sk: 'W' })), { projection: 'id, deleted' });
  const live = new Set(items.filter((item) => item.deleted !== true).map((item) => item.id as string));
  return unique.filter((id) => !live.has(id));
}

/**
 * Every live workflow of a tenant with all its attributes (the listing index holds only some),
 * newest first: one index query, then one batch read per 100 workflows.
 */
export async function workflowRecords(ctx: StoreContext, tenant: string): Promise<Workflow[]> {
  const listed = await allWorkflows(ctx, tenant);
  const items = await batchGetItems(ctx, 'read the workflows', listed.map((w) => ({ pk: keys.workflow(tenant, w.id), sk: 'W' })));
  const byId = new Map(items.filter((item) => item.deleted !== true).map((item) => [item.id as string, toWorkflow(item)]));
  return listed.map((w) => byId.get(w.id)).filter((w): w is Workflow => w !== undefined);
}

/** Every live workflow of a tenant as the listing index holds it (id, name, times), newest first. */
export async function allWorkflows(ctx: StoreContext, tenant: string): Promise<Workflow[]> {
  const items = await queryAll(ctx, 'list workflows', {
    IndexName: LISTING_INDEX,
    KeyConditionExpression: 'gsi1pk = :pk',
    ExpressionAttributeValues: { ':pk': keys.workflowList(tenant) },
    ScanIndexForward: false,
  });
  return items.map((i) => ({ ...toWorkflow(i), tenant }));
}

/**
 * Marks the workflow deleted: no new runs; live runs keep their pinned version. Its replays go
 * first (a failure leaves the workflow as it was; a page a replay worker writes after them
 * expires with its TTL, and reads answer 404 for a deleted workflow's replays anyway).
 */
export async function deleteWorkflow(ctx: StoreContext, tenant: string, id: string): Promise<void> {
  await deleteReplays(ctx, tenant, id);
  await updateWorkflowItem(ctx, tenant, id, 'delete the workflow', 'workflow', {
    UpdateExpression: 'SET deleted = :yes, updated_at = :at REMOVE gsi1pk, gsi1sk',
    ConditionExpression: 'attribute_exists(pk)',
    ExpressionAttributeValues: { ':yes': true, ':at': iso(ctx) },
  });
}

/** One conditional update of the workflow item; a failed condition answers `missing` not found. */
async function updateWorkflowItem(
  ctx: StoreContext,
  tenant: string,
  id: string,
  what: string,
  missing: string,
  update: Pick<UpdateCommandInput, 'UpdateExpression' | 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'>,
): Promise<void> {
  try {
    await call(what, () => ctx.doc.send(new UpdateCommand({ TableName: ctx.table, Key: { pk: keys.workflow(tenant, id), sk: 'W' }, ...update })));
  } catch (error) {
    if (error instanceof ConditionFailed) throw new NotFoundError(missing);
    throw error;
  }
}

export async function listWorkflows(ctx: StoreContext, tenant: string, limit: number, cursor?: Record<string, unknown>) {
  const { Items = [], LastEvaluatedKey } = await call('list workflows', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      IndexName: LISTING_INDEX,
      KeyConditionExpression: 'gsi1pk = :pk',
      ExpressionAttributeValues: { ':pk': keys.workflowList(tenant) },
      ScanIndexForward: false,
      Limit: limit,
      ExclusiveStartKey: cursor,
    })),
  );
  return { items: Items.map((i) => ({ id: i.id as string, name: i.name as string, createdAt: i.created_at as string, updatedAt: i.updated_at as string })), cursor: LastEvaluatedKey };
}

/** Compressed DSLs past this size are refused (DynamoDB's item limit is 400 KB). */
export const MAX_STORED_DSL_BYTES = 350 * 1024;

export interface VersionSummary {
  version: number;
  createdAt: string;
}

/** Every version of a workflow, oldest first, without their DSLs. */
export async function listVersions(ctx: StoreContext, tenant: string, id: string): Promise<VersionSummary[]> {
  const items = await queryAll(ctx, 'list versions', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
    ExpressionAttributeValues: { ':pk': keys.workflow(tenant, id), ':v': 'V#' },
    ProjectionExpression: 'version, created_at',
  });
  return items.map((i) => ({ version: i.version as number, createdAt: i.created_at as string }));
}

function versionItem(pk: string, version: number, dsl: unknown, at: string): Record<string, unknown> {
  const bytes = Buffer.from(encode(dsl, Number.POSITIVE_INFINITY).bytes);
  if (bytes.length > MAX_STORED_DSL_BYTES) {
    throw new EaselError('payload_too_large', `the workflow DSL is too large to store (${Math.ceil(bytes.length / 1024)} KB compressed)`);
  }
  return { pk, sk: keys.version(version), kind: 'version', version, created_at: at, dsl: bytes };
}

function toWorkflow(item: Record<string, unknown>): Workflow {
  return {
    tenant: item.tenant as string,
    id: item.id as string,
    name: item.name as string,
    description: (item.description as string) ?? '',
    canvasType: typeof item.canvas_type === 'string' ? item.canvas_type : null,
    canvasCategory: typeof item.canvas_category === 'string' ? item.canvas_category : DEFAULT_CANVAS_CATEGORY,
    tags: Array.isArray(item.tags) ? (item.tags as string[]) : [],
    activeVersion: item.active_version as number,
    latestVersion: item.latest_version as number,
    deleted: item.deleted === true,
    createdAt: item.created_at as string,
    updatedAt: item.updated_at as string,
    ...(typeof item.webhook_id === 'string' ? { webhookId: item.webhook_id } : {}),
    settings: typeof item.settings === 'object' && item.settings !== null ? (item.settings as Record<string, unknown>) : {},
  };
}
