/**
 * When a session head goes — expired by TTL or deleted — the rest of its partition goes too.
 * Driven by the table's stream (KEYS_ONLY): each REMOVE of a head `T#~` deletes every item left
 * in that partition. Idempotent, so a redelivered record does no harm.
 */
import { deletePartition } from './sessions';
import type { StoreContext } from './dynamo';
import { SESSION_HEAD_SK } from './item-keys';

export interface RemovedKey {
  /** The stream record's id, for partial batch failures. */
  id: string;
  pk: string;
  sk: string;
}

export interface CleanupResult {
  /** Records whose cascade failed and should be retried. */
  failed: string[];
  /** Items deleted. */
  deleted: number;
}

const SESSION_PK = /^T#[^#]+#S#[0-9a-f]{32}$/;

export async function cascadeRemovedHeads(ctx: StoreContext, removed: readonly RemovedKey[]): Promise<CleanupResult> {
  const failed: string[] = [];
  let deleted = 0;
  for (const r of removed) {
    if (r.sk !== SESSION_HEAD_SK || !SESSION_PK.test(r.pk)) continue;
    try {
      deleted += await deletePartition(ctx, r.pk);
    } catch {
      failed.push(r.id);
    }
  }
  return { failed, deleted };
}
