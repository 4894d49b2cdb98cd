/**
 * The runtime's knowledge service on DynamoDB Local: the APIs' `Runtime.knowledge` and the
 * knowledge a run of one tenant is handed (`servicesFor(tenant).knowledge`) are the same store,
 * one tenant at a time; a local knowledge base needs nothing beyond the runtime.
 */
import { describe, expect, it } from 'vitest';
import type { ComponentContext } from '../../lib/canvas/component';
import { knowledgeOf } from '../../lib/components/services';
import { readConfig } from '../../lib/config';
import { buildRuntime } from '../../lib/runtime';
import { newTenant } from '../helpers/engine';
import { testTable } from '../helpers/dynamo';

describe('Runtime.knowledge', () => {
  it('is what each tenant\'s runs search, and only their own', async () => {
    const { endpoint, tableName } = testTable();
    const runtime = buildRuntime(readConfig({ EASEL_DYNAMODB_ENDPOINT: endpoint, EASEL_DYNAMODB_TABLE: tableName }));
    try {
      const tenant = newTenant();
      const kb = await runtime.knowledge.create(tenant, { name: 'Runbook', backend: 'local' });
      const doc = await runtime.knowledge.upload(tenant, kb.id, { name: 'runbook.md', mime_type: 'text/markdown', bytes: new TextEncoder().encode('# Restarts\nRestart the gateway with the blue switch.') });
      await runtime.knowledge.parse(tenant, kb.id, [doc.id]);

      const ctx = (t: string) => ({ services: runtime.engine.servicesFor!(t) }) as unknown as ComponentContext;
      const run = knowledgeOf(ctx(tenant));
      const { found } = await run.resolve(['runbook']);
      expect(found.map((k) => k.id)).toEqual([kb.id]);
      const result = await run.retrieve(found, { question: 'how to restart the gateway', top_n: 3, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 }, new AbortController().signal);
      expect(result.chunks[0]!.content_with_weight).toContain('blue switch');
      expect(await knowledgeOf(ctx(newTenant())).resolve([kb.id, 'runbook'])).toEqual({ found: [], missing: [kb.id, 'runbook'] });
      // a run without a tenant has no knowledge bases at all
      expect(() => knowledgeOf({ services: runtime.engine.services } as unknown as ComponentContext)).toThrow(/not configured/);
    } finally {
      runtime.dynamo.destroy();
    }
  });
});
