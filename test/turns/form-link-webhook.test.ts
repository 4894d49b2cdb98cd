/**
 * A form that asks for its link (UserFillUp `form_link`) has it sent with the `turn.paused`
 * webhook of the async turn that pauses there: a signed webhook to a receiving server, whose
 * link answers the form without a key. A form that does not ask gets no link.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { accessDeps, type Served, serveApp } from '../helpers/http';

let hooks: { server: Server; url: string; received: { event: string; body: string }[] };
let api: Served;
let queue: ReturnType<typeof createInProcessQueue>;

beforeAll(async () => {
  hooks = { server: undefined as unknown as Server, url: '', received: [] };
  hooks.server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    hooks.received.push({ event: String(req.headers['easel-event']), body });
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => hooks.server.listen(0, '127.0.0.1', resolve));
  hooks.url = `http://127.0.0.1:${(hooks.server.address() as AddressInfo).port}/hook`;

  const engine = testEngine({ allow: ['127.0.0.1'] });
  const guard = new SsrfGuard({ allow: ['127.0.0.1'] });
  // the worker and the API on one master key ring, as a deployment has them
  const secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  const { access } = accessDeps(engine, { secrets });
  queue = createInProcessQueue((records) => processBatch({ engine, guard, formLinks: { tokens: access.formTokens, baseUrl: 'https://forms.example' } }, records), { retryDelayMs: 50 });
  api = await serveApp(engine, { enqueue: queue.enqueue, asyncLeaseMs: 60_000, guard, secrets });
});
afterAll(async () => {
  await api.close();
  hooks.server.closeAllConnections();
  await new Promise<void>((resolve) => hooks.server.close(() => resolve()));
});

const form = (formLink: unknown) =>
  graph({
    begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Approve']],
    'UserFillUp:Approve': ['UserFillUp', { tips: 'Approve the invoice?', ...(formLink !== undefined ? { form_link: formLink } : {}), decisions: [{ id: 'ok', label: 'Approve', to: 'Message:Ok' }] }, ['Message:Ok']],
    'Message:Ok': ['Message', { content: ['approved'] }],
  });

async function pauseAsync(dsl: unknown) {
  const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'invoice', dsl } })).json.id as string;
  const accepted = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'invoice 7' }, callback_url: hooks.url }, headers: { prefer: 'respond-async' } });
  expect(accepted.status).toBe(202);
  await queue.idle();
  const hook = hooks.received.find((h) => JSON.parse(h.body).data.run_id === accepted.json.run_id)!;
  expect(hook.event).toBe('turn.paused');
  return JSON.parse(hook.body).data as { run_id: string; form_link?: { url: string; token: string; link_id: string; expires_at: string; turn_number: number } };
}

describe('form links in turn.paused webhooks', () => {
  it('go with the pause of a form that asks for them, and answer it without a key', async () => {
    const paused = await pauseAsync(form({ expires_in_seconds: 3600 }));
    expect(paused.form_link).toMatchObject({ turn_number: 1, link_id: expect.stringMatching(/^[0-9a-f]{20}$/) });
    expect(paused.form_link!.url).toBe(`https://forms.example/playground/form#${paused.form_link!.token}`);
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${paused.run_id}`);
    // counted from the pause
    const lifetime = Date.parse(paused.form_link!.expires_at) - Date.parse(run.json.updated_at);
    expect(lifetime).toBeGreaterThan(3590_000);
    expect(lifetime).toBeLessThanOrEqual(3600_000);

    const token = paused.form_link!.token;
    const shown = await api.call('GET', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token } });
    expect(shown.json).toMatchObject({ tips: 'Approve the invoice?', link_id: paused.form_link!.link_id });
    const answered = await api.call('POST', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token }, body: { inputs: { decision: 'ok' } } });
    expect(answered.json).toEqual({ answered: true, status: 'completed', turn_number: 2 });
  });

  it('are not sent for a form that does not ask', async () => {
    const paused = await pauseAsync(form(undefined));
    expect(paused.form_link).toBeUndefined();
  });

  it('are refused at import when asked for wrongly', async () => {
    const res = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'bad', dsl: form({ expires_in_seconds: 5 }) } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.json)).toContain('form_link');
  });
});
