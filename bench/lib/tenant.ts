/**
 * A tenant of its own for one measurement: an admin API key and the bench workflow
 * (bench/workflow.ts), each under fresh random ids.
 */
import { randomBytes } from 'node:crypto';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import type { StoreContext } from '../../lib/store/dynamo';
import { createWorkflow } from '../../lib/store/workflows';
import { benchDsl } from '../workflow';

export interface BenchTenant {
  tenant: string;
  /** The API key's secret, for `Authorization: Bearer`. */
  secret: string;
  workflowId: string;
}

export async function seedBenchTenant(store: StoreContext, name = 'bench'): Promise<BenchTenant> {
  const tenant = `bench${randomBytes(4).toString('hex')}`;
  const secret = `bench-${randomBytes(16).toString('hex')}`;
  await putApiKey(store, { tenant, id: randomBytes(8).toString('hex'), name, scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
  const workflowId = `wf${randomBytes(4).toString('hex')}`;
  await createWorkflow(store, { tenant, id: workflowId, name, dsl: benchDsl() });
  return { tenant, secret, workflowId };
}
