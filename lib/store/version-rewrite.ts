/**
 * The operator's pass over every stored workflow version, for migrations that keep a version's
 * meaning while changing how it is written (a credential replaced by the reference to the
 * tenant secret it was moved to). Versions are otherwise immutable: nothing on the request
 * path rewrites one, and a rewrite must leave a version that runs exactly as before, since
 * warm processes may hold the old text.
 */
import { ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { decode, encode } from './codec';
import { call, ConditionFailed, type StoreContext } from './dynamo';
import { EaselError } from '../errors';
import { keys } from './item-keys';
import { MAX_STORED_DSL_BYTES } from './workflows';

export interface StoredVersion {
  tenant: string;
  workflowId: string;
  version: number;
  dsl: unknown;
  /** The stored bytes, to rewrite only what was read. */
  readonly stored: Uint8Array;
}

const WORKFLOW_PK = /^T#(.+)#W#([^#]+)$/;

/** Every version of every tenant (or of one), a page of the table at a time (a full scan: an operator's task). */
export async function* allVersions(ctx: StoreContext, options: { tenant?: string } = {}): AsyncGenerator<StoredVersion> {
  const ofTenant = options.tenant === undefined ? {} : { ':tenant': `T#${options.tenant}#W#` };
  let start: Record<string, unknown> | undefined;
  do {
    const page = await call('scan the workflow versions', () =>
      ctx.doc.send(new ScanCommand({
        TableName: ctx.table,
        FilterExpression: `#kind = :version AND begins_with(sk, :v)${options.tenant === undefined ? '' : ' AND begins_with(pk, :tenant)'}`,
        ExpressionAttributeNames: { '#kind': 'kind' },
        ExpressionAttributeValues: { ':version': 'version', ':v': 'V#', ...ofTenant },
        ExclusiveStartKey: start,
        ConsistentRead: true,
      })),
    );
    for (const item of page.Items ?? []) {
      const match = WORKFLOW_PK.exec(String(item.pk));
      if (!match || !(item.dsl instanceof Uint8Array) || typeof item.version !== 'number') continue;
      yield { tenant: match[1] as string, workflowId: match[2] as string, version: item.version, dsl: decode(item.dsl, new Map()), stored: item.dsl };
    }
    start = page.LastEvaluatedKey;
  } while (start);
}

/**
 * Replaces a version's DSL, if it is still the one read (another rewrite in between wins).
 * @returns false when the version changed or is gone since it was read.
 */
export async function rewriteVersion(ctx: StoreContext, read: StoredVersion, dsl: unknown): Promise<boolean> {
  const bytes = Buffer.from(encode(dsl, Number.POSITIVE_INFINITY).bytes);
  if (bytes.length > MAX_STORED_DSL_BYTES) throw new EaselError('payload_too_large', `workflow ${read.workflowId} version ${read.version}: the rewritten DSL is too large to store`);
  try {
    await call('rewrite the workflow version', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk: keys.workflow(read.tenant, read.workflowId), sk: keys.version(read.version) },
        UpdateExpression: 'SET dsl = :dsl',
        ConditionExpression: 'dsl = :read',
        ExpressionAttributeValues: { ':dsl': bytes, ':read': read.stored },
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}
