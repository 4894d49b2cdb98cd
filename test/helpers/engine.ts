import { randomBytes } from 'node:crypto';
import { builtinComponents } from '../../lib/components';
import type { RunKnowledge } from '../../lib/knowledge/types';
import type { StoreContext } from '../../lib/store/dynamo';
import { createWorkflow } from '../../lib/store/workflows';
import type { TurnEngine } from '../../lib/turns/execute';
import { testTable } from './dynamo';
import { testServices } from './services';

/** A fresh tenant id: tests share one table and never see each other's items. */
export function newTenant(): string {
  return `t${randomBytes(6).toString('hex')}`;
}

export function testStore(): StoreContext {
  const { doc, tableName } = testTable();
  return { doc, table: tableName };
}

export function testEngine(options: { openaiUrl?: string; leaseMs?: number; store?: StoreContext; allow?: string[]; knowledge?: RunKnowledge } = {}): TurnEngine {
  return {
    store: options.store ?? testStore(),
    registry: builtinComponents,
    services: testServices({
      ...(options.openaiUrl ? { openaiUrl: options.openaiUrl } : {}),
      ...(options.allow ? { allow: options.allow } : {}),
      ...(options.knowledge ? { knowledge: options.knowledge } : {}),
    }),
    // a claim outlives any turn of a test on the wall clock; tests of expiry move their own clock past it
    leaseMs: options.leaseMs ?? 60_000,
  };
}

export async function newWorkflow(engine: TurnEngine, tenant: string, dsl: unknown, id = `wf${randomBytes(4).toString('hex')}`): Promise<string> {
  await createWorkflow(engine.store, { tenant, id, name: id, dsl });
  return id;
}
