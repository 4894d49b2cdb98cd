/** Key builders: the one place that knows how items are addressed (see table.ts). */

export const SESSION_HEAD_SK = 'T#~';
export const TURN_PREFIX = 'T#';
export const SECRET_PREFIX = 'SECRET#';
export const SECRET_DATA_KEY_PREFIX = 'SDK#';
export const KNOWLEDGE_BASE_SK = 'KB';
/** A knowledge base's partition (the stream cleanup's test). */
export const KNOWLEDGE_BASE_PK = /^T#[^#]+#KB#[0-9a-f]{32}$/;
export const KNOWLEDGE_DOCUMENT_PREFIX = 'D#';
export const KNOWLEDGE_CHUNK_PREFIX = 'C#';

export const keys = {
  tenant: (tenant: string) => `T#${tenant}`,
  apiKey: (keyId: string) => `KEY#${keyId}`,
  workflow: (tenant: string, workflowId: string) => `T#${tenant}#W#${workflowId}`,
  version: (version: number) => `V#${String(version).padStart(6, '0')}`,
  session: (tenant: string, sessionId: string) => `T#${tenant}#S#${sessionId}`,
  /** Turn n's slot: its claim while the turn runs (turn-slot.ts), then its record. */
  turn: (turn: number) => `${TURN_PREFIX}${String(turn).padStart(8, '0')}`,
  blob: (hash: string) => `B#${hash}`,
  /** The e-mail of the form link of the pause after turn n, one per form (store/pause-mail.ts). */
  pauseMail: (turn: number, componentId: string) => `MAIL#${String(turn).padStart(8, '0')}#${componentId}`,
  blobChunk: (hash: string, index: number) => `B#${hash}#${String(index).padStart(4, '0')}`,
  idempotency: (tenant: string, key: string) => `T#${tenant}#I#${key}`,
  /** Tenant secrets, under the tenant's own item (see store/secrets.ts). */
  secret: (name: string) => `${SECRET_PREFIX}${name}`,
  secretDataKey: (version: number) => `${SECRET_DATA_KEY_PREFIX}${String(version).padStart(6, '0')}`,
  /**
   * Quota counters (store/quotas.ts). Usage of one scope — a shard of the tenant's (`~<i>`), an
   * end user (`user:<id>`) or an execute key (`key:<id>`) — one item a UTC day (`D#<yyyy-mm-dd>`):
   * its model tokens, and its turns in the latest minute.
   */
  quotaUsage: (tenant: string, scope: string) => `T#${tenant}#Q#${scope}`,
  quotaDay: (day: string) => `D#${day}`,
  /** Runs started by one execute key (`key:<id>`) or client address (`addr:<a>`), one item a minute. */
  quotaRuns: (tenant: string, scope: string) => `T#${tenant}#QR#${scope}`,
  quotaMinute: (minute: number) => `M#${minute}`,
  /** A workflow's webhook (store/webhooks.ts), by its opaque id and by the workflow's id. */
  webhook: (hookId: string) => `HOOK#${hookId}`,
  webhookOfWorkflow: (workflowId: string) => `HOOKWF#${workflowId}`,
  /**
   * Knowledge bases (store/knowledge.ts): one partition each, holding its item `KB`, its
   * documents `D#<doc>`, their bytes `R#<doc>#<i>`, their chunks `C#<doc>#<parse run>#<i>` and
   * the index blobs `B#<sha256>`; a name item and an item per alias make both unique in the tenant.
   */
  knowledgeBase: (tenant: string, kbId: string) => `T#${tenant}#KB#${kbId}`,
  knowledgeName: (tenant: string, nameKey: string) => `T#${tenant}#KBN#${nameKey}`,
  knowledgeAlias: (tenant: string, alias: string) => `T#${tenant}#KBA#${alias}`,
  knowledgeDocument: (docId: string) => `${KNOWLEDGE_DOCUMENT_PREFIX}${docId}`,
  knowledgeDocumentBytes: (docId: string, part: number) => `R#${docId}#${String(part).padStart(4, '0')}`,
  /** A document's chunks of one parse run, in order; `run` tells a finished parse's apart from one in flight. */
  knowledgeChunkRun: (docId: string, run: string) => `${KNOWLEDGE_CHUNK_PREFIX}${docId}#${run}#`,
  knowledgeChunk: (docId: string, run: string, index: number) => `${KNOWLEDGE_CHUNK_PREFIX}${docId}#${run}#${String(index).padStart(6, '0')}`,
  /** A tenant's MCP servers (store/mcp-servers.ts): each server `S#<id>`, its name `N#<name>`, their count `COUNT`. */
  mcpServers: (tenant: string) => `T#${tenant}#MCP`,
  /**
   * A workflow's replays against its versions (store/replays.ts), one partition per workflow so
   * that deleting the workflow deletes them: each replay's job `R#<id>#A`, its pages' progress
   * `R#<id>#S#<page>` and their results `R#<id>#X#<page>`.
   */
  replays: (tenant: string, workflowId: string) => `T#${tenant}#W#${workflowId}#R`,
  replayJob: (replayId: string) => `R#${replayId}#A`,
  replayProgress: (replayId: string, page: number) => `R#${replayId}#S#${String(page).padStart(4, '0')}`,
  replayResults: (replayId: string, page: number) => `R#${replayId}#X#${String(page).padStart(4, '0')}`,
  /** gsi1: workflows of a tenant; sessions of a workflow. */
  workflowList: (tenant: string) => `T#${tenant}#WF`,
  sessionList: (tenant: string, workflowId: string) => `T#${tenant}#W#${workflowId}#S`,
  /** gsi1: knowledge bases of a tenant. */
  knowledgeList: (tenant: string) => `T#${tenant}#KBS`,
};

export function turnFromSk(sk: string): number {
  return Number(sk.slice(TURN_PREFIX.length));
}
