/**
 * SSRF through the API: a tenant's workflow whose Invoke URL comes from the user's message is
 * refused for every address class the guard refuses, over IPv4 and IPv6, in every spelling;
 * so is a turn's callback URL, the other URL a tenant supplies — when it is given, before the
 * turn starts (over HTTP and on the queue).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { listSessions } from '../../lib/store/session-listing';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { sqsRecord } from '../helpers/sqs';

const REFUSED: [string, string][] = [
  ['loopback', 'http://127.0.0.1:9/'],
  ['loopback, decimal', 'http://2130706433/'],
  ['loopback, octal', 'http://0177.0.0.1/'],
  ['loopback, hex', 'http://0x7f.1/'],
  ['loopback IPv6', 'http://[::1]/'],
  ['loopback by name', 'http://localhost:9/'],
  ['unspecified', 'http://0.0.0.0/'],
  ['unspecified IPv6', 'http://[::]/'],
  ['private 10/8', 'http://10.0.0.8/'],
  ['private 172.16/12', 'http://172.31.255.1/'],
  ['private 192.168/16', 'http://192.168.0.1/'],
  ['shared 100.64/10', 'http://100.64.0.1/'],
  ['metadata', 'http://169.254.169.254/latest/meta-data/'],
  ['metadata IPv6', 'http://[fd00:ec2::254]/'],
  ['link-local IPv6', 'http://[fe80::1]/'],
  ['unique-local IPv6', 'http://[fc00::1]/'],
  ['IPv4-mapped metadata', 'http://[::ffff:169.254.169.254]/'],
  ['IPv4-mapped loopback, hex', 'http://[::ffff:7f00:1]/'],
  ['NAT64 metadata', 'http://[64:ff9b::a9fe:a9fe]/'],
  ['multicast', 'http://224.0.0.1/'],
  ['reserved', 'http://240.0.0.1/'],
  ['broadcast', 'http://255.255.255.255/'],
  ['not http', 'file:///etc/passwd'],
  ['credentials', 'http://user:pass@example.com/'],
];

let api: Served;
let workflowId: string;
let enqueued = 0;
beforeAll(async () => {
  api = await serveApp(testEngine(), { enqueue: async () => void enqueued++ });
  const dsl = graph({
    begin: ['Begin', {}, ['Invoke:Fetch']],
    'Invoke:Fetch': ['Invoke', { url: '{sys.query}', method: 'get', timeout: 2 }, ['Message:Show']],
    'Message:Show': ['Message', { content: ['{Invoke:Fetch@result}'] }],
  });
  workflowId = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'fetcher', dsl } })).json.id;
});
afterAll(async () => {
  await api.close();
});

describe('SSRF through the API', () => {
  it.each(REFUSED)('refuses %s (%s)', async (_label, url) => {
    const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: url } } });
    expect(res.status).toBe(200);
    expect(res.json.status).toBe('failed');
    expect(res.json.error).toMatchObject({ component_id: 'Invoke:Fetch' });
    expect(res.json.error.message).toMatch(/refused|not allowed|not valid|only http/i);
  });
});

describe('SSRF through callback URLs', () => {
  const engine = testEngine();
  const hello = graph({ begin: ['Begin', {}, ['Message:Hi']], 'Message:Hi': ['Message', { content: ['hi'] }] });

  /**
   * One queued turn with `callback_url`: how the worker reported it, what it logged about its
   * webhook, and how many runs it started.
   */
  async function queuedTurn(callbackUrl: string, guard: SsrfGuard): Promise<{ outcome: Record<string, unknown> | undefined; webhooks: Record<string, unknown>[]; runs: number }> {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, hello);
    const logged: Record<string, unknown>[] = [];
    const record = sqsRecord(JSON.stringify({ tenant, workflow_id: workflowId, run_input: { query: 'x' }, callback_url: callbackUrl }));
    const result = await processBatch({ engine, guard, log: (message, fields) => logged.push({ message, ...fields }) }, [record]);
    expect(result).toEqual({ batchItemFailures: [] });
    return {
      outcome: logged.find((entry) => String(entry.message).startsWith('queued turn')),
      webhooks: logged.filter((entry) => String(entry.message).includes('webhook')),
      runs: (await listSessions(engine.store, tenant, workflowId, { limit: 5 })).items.length,
    };
  }

  it.each(REFUSED)('refuses %s (%s) before the queued turn starts', async (_label, url) => {
    const { outcome, runs } = await queuedTurn(url, new SsrfGuard());
    expect(outcome).toMatchObject({ kind: 'failed', code: 'invalid_request', reason: expect.stringMatching(/^callback_url: .*(refused|not allowed|not valid|http\(s\))/i) });
    expect(runs).toBe(0);
  });

  it.each(REFUSED)('refuses %s (%s) as an async turn\'s callback over HTTP, with nothing started', async (_label, url) => {
    const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'x' }, callback_url: url }, headers: { prefer: 'respond-async' } });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'invalid_request', field: 'callback_url' });
    expect(enqueued).toBe(0);
  });

  it('delivers to an allowed receiver (the same path, so the refusals above are the guard\'s)', async () => {
    let received = 0;
    const receiver = createServer((req, res) => {
      received++;
      req.resume();
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const allowed = await queuedTurn(url, new SsrfGuard({ allow: ['127.0.0.1'] }));
      expect(allowed.outcome).toMatchObject({ kind: 'done' });
      expect(allowed.webhooks).toEqual([]);
      expect(received).toBe(1);
      // the same receiver, refused without the test's allowance
      const refused = await queuedTurn(url, new SsrfGuard());
      expect(refused).toMatchObject({ outcome: { kind: 'failed', code: 'invalid_request' }, runs: 0 });
      expect(received).toBe(1);
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});
