/** Key builders: the one place that knows how items are addressed (see table.ts). */

export const SESSION_HEAD_SK = 'T#~';
export const TURN_PREFIX = 'T#';
export const SECRET_PREFIX = 'SECRET#';
export const SECRET_DATA_KEY_PREFIX = 'SDK#';

export const keys = {
  tenant: (tenant: string) => `T#${tenant}`,
  apiKey: (keyId: string) => `KEY#${keyId}`,
  workflow: (tenant: string, workflowId: string) => `T#${tenant}#W#${workflowId}`,
  version: (version: number) => `V#${String(version).padStart(6, '0')}`,
  session: (tenant: string, sessionId: string) => `T#${tenant}#S#${sessionId}`,
  /** Turn n's slot: its claim while the turn runs (turn-slot.ts), then its record. */
  turn: (turn: number) => `${TURN_PREFIX}${String(turn).padStart(8, '0')}`,
  blob: (hash: string) => `B#${hash}`,
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
  /** gsi1: workflows of a tenant; sessions of a workflow. */
  workflowList: (tenant: string) => `T#${tenant}#WF`,
  sessionList: (tenant: string, workflowId: string) => `T#${tenant}#W#${workflowId}#S`,
};

export function turnFromSk(sk: string): number {
  return Number(sk.slice(TURN_PREFIX.length));
}
