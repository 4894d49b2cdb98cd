/**
 * lib/runtime from a configuration: what it builds, secrets only in a tenant's runs, the key
 * parameter read on demand, and the worker's dependencies. Nothing here contacts DynamoDB or
 * AWS (tenant secrets themselves are tested against DynamoDB Local in test/secrets).
 */
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../lib/config';
import { secretOf } from '../../lib/components/services';
import type { ComponentContext } from '../../lib/canvas/component';
import { buildModels, buildRuntime, queueDeps } from '../../lib/runtime';

const env = { EASEL_DYNAMODB_ENDPOINT: 'http://127.0.0.1:9', EASEL_DYNAMODB_TABLE: 'easel-runtime' };
const componentSecret = (services: Readonly<Record<string, unknown>>, name: string) => secretOf({ services } as unknown as ComponentContext, name);

describe('buildRuntime', () => {
  it('builds the store, the engine and its services from the configuration', async () => {
    const config = readConfig({ ...env, EASEL_STEP_BUDGET_TURN: '77', EASEL_SECRET_TOKEN: 'direct-value' });
    const runtime = buildRuntime(config);
    expect(runtime.store.table).toBe('easel-runtime');
    expect(runtime.engine.store).toBe(runtime.store);
    expect(runtime.engine.stepBudgetTurn).toBe(77);
    expect(runtime.engine.leaseMs).toBe(config.store.leaseMs);
    expect(runtime.models.resolve('anything').id).toBe('echo');
    // a run without a tenant resolves no secret at all, not even the operator's
    expect(await componentSecret(runtime.engine.services, 'TOKEN')).toBeUndefined();
    expect(runtime.engine.servicesFor?.('acme')).toMatchObject({ secret: expect.any(Function) });
    expect(runtime.enqueue).toBeUndefined();
    runtime.dynamo.destroy();
  });

  it('queues turns when a queue is configured (the SQS client waits for the first message)', () => {
    const runtime = buildRuntime(readConfig({ ...env, EASEL_TURN_QUEUE_URL: 'http://127.0.0.1:9/1/q' }));
    expect(runtime.enqueue).toEqual(expect.any(Function));
    expect(queueDeps(runtime).requeue).toBe(runtime.enqueue);
  });
});

describe('buildModels', () => {
  it('reads the OpenAI-compatible key from its parameter when a request needs it', async () => {
    let reads = 0;
    let authorization: string | undefined;
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => {
      authorization = req.headers.authorization;
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const config = readConfig({ ...env, EASEL_LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, EASEL_LLM_DEFAULT_MODEL: 'openai:m', EASEL_LLM_API_KEY_PARAMETER: '/easel/llm-key', EASEL_LLM_MAX_ATTEMPTS: '1' });
      const models = buildModels(config, async (name) => (reads++, `key-from-${name.slice(1).replace('/', '-')}`));
      expect(reads).toBe(0);
      await expect((async () => {
        for await (const _ of models.resolve('').chat({ messages: [{ role: 'user', content: 'hi' }] })) break;
      })()).rejects.toThrow();
      expect(reads).toBe(1);
      expect(authorization).toBe('Bearer key-from-easel-llm-key');
    } finally {
      server.close();
    }
  });
});
