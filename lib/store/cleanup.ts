/**
 * When a session head goes — expired by TTL or deleted — the rest of its partition goes too;
 * likewise the chunks of an uploaded file's content when its index item expires, and whatever
 * a parse still in flight wrote into a knowledge base after it was deleted. Driven by the
 * table's stream (KEYS_ONLY). Idempotent, so a redelivered record does no harm.
 */
import { deletePartition } from './partitions';
import type { StoreContext } from './dynamo';
import { KNOWLEDGE_BASE_PK, KNOWLEDGE_BASE_SK, SESSION_HEAD_SK } from './item-keys';

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
/** Uploaded file content: its index item `C` expires, its chunks follow. */
const FILE_CONTENT_PK = /^T#[^#]+#FB#[0-9a-f]{64}$/;

export async function cascadeRemovedHeads(ctx: StoreContext, removed: readonly RemovedKey[]): Promise<CleanupResult> {
  const failed: string[] = [];
  let deleted = 0;
  for (const r of removed) {
    const session = r.sk === SESSION_HEAD_SK && SESSION_PK.test(r.pk);
    const fileContent = r.sk === 'C' && FILE_CONTENT_PK.test(r.pk);
    const knowledgeBase = r.sk === KNOWLEDGE_BASE_SK && KNOWLEDGE_BASE_PK.test(r.pk);
    if (!session && !fileContent && !knowledgeBase) continue;
    try {
      deleted += await deletePartition(ctx, r.pk);
    } catch {
      failed.push(r.id);
    }
  }
  return { failed, deleted };
}
