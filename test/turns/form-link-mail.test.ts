/**
 * Form links by e-mail (UserFillUp `form_link_email`) against a real SMTP server on 127.0.0.1
 * (nodemailer's smtp-server, STARTTLS with a certificate made for the test) and DynamoDB Local:
 * a turn that pauses at such a form says so in its response, commits, then sends the form's
 * link through the Email tool's sending code with the tenant's SMTP settings (tenant secrets set
 * through the API); the link in the mail answers the form. Once per turn: a request retried with
 * its Idempotency-Key and a queue message delivered twice send nothing more; a first sender that
 * met a transient failure leaves it to the retry, which sends it once. Without mail configured,
 * or without an address, the pause still happens and the response says why nothing was sent.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { services } from '../../lib/components/services';
import { type Resolver, SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { secretResolver } from '../../lib/secrets/resolver';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { createToolRegistry, emailTool } from '../../lib/tools';
import { getPauseMail } from '../../lib/store/pause-mail';
import { processMessage } from '../../lib/turns/queue';
import type { TurnEngine } from '../../lib/turns/execute';
import { graph } from '../helpers/dsl-builder';
import { testStore } from '../helpers/engine';
import { accessDeps, type Served, serveApp } from '../helpers/http';
import { selfSignedCertificate } from '../helpers/self-signed';
import { SmtpTestServer } from '../helpers/smtp-server';
import { skippingTimer } from '../tools/support';

const SENDER = 'forms@example.com';
const PASSWORD = 'smtp-forms-PASSWORD-never-shown-4417';
const certificate = selfSignedCertificate(['smtp.test']);

let smtp: SmtpTestServer;
let api: Served;
let engine: TurnEngine;

beforeAll(async () => {
  smtp = await SmtpTestServer.start({ secure: false, key: certificate.key, cert: certificate.cert, user: SENDER, password: PASSWORD });
  // `smtp.test` is the local server, let through the guard by name
  const resolve: Resolver = async (host) => {
    if (host === 'smtp.test') return [{ address: '127.0.0.1', family: 4 }];
    throw new Error(`ENOTFOUND ${host}`);
  };
  const guard = new SsrfGuard({ allow: ['smtp.test'], resolve });
  // the test server's port in the role of 587, its certificate trusted; backoffs between attempts skipped
  const tools = createToolRegistry([emailTool({ ports: { [smtp.port]: 'starttls' }, tls: { ca: certificate.cert } })], { timer: skippingTimer().timer });
  const store = testStore();
  const secrets = new TenantSecrets({ store, master: new MasterKeys(new StaticKeyRing()) });
  const resolverFor = secretResolver({ tenantSecrets: secrets });
  engine = {
    store,
    registry: (await import('../../lib/components')).builtinComponents,
    services: services({ guard, tools }),
    servicesFor: (tenant) => services({ guard, tools, secret: resolverFor(tenant) }),
    leaseMs: 60_000,
  };
  // the API and the engine on one master key ring: the engine's links are the API's
  engine.formLinks = { tokens: accessDeps(engine, { secrets }).access.formTokens, baseUrl: 'https://forms.example' };
  api = await serveApp(engine, { secrets });
});
afterAll(async () => {
  await Promise.all([smtp.close(), api?.close()]);
});
beforeEach(() => {
  smtp.reset();
});

const SETTINGS = () => ({ smtp_server: 'smtp.test', smtp_port: smtp.port, email: SENDER, sender_name: 'Refund desk', password: '' });

/** A fresh tenant of the API's, with an admin key, and (unless not) its mail configured through the secrets API. */
async function tenantWithMail(settings: Record<string, unknown> | null = SETTINGS(), password: string | null = PASSWORD) {
  const tenant = `t${Math.random().toString(16).slice(2, 10)}`;
  const key = await api.addKey(tenant, 'admin');
  if (settings) expect((await api.call('PUT', '/workflows/v1/secrets/SMTP_SETTINGS', { key, body: { value: JSON.stringify(settings) } })).status).toBe(201);
  if (password) expect((await api.call('PUT', '/workflows/v1/secrets/SMTP_PASSWORD', { key, body: { value: password } })).status).toBe(201);
  return { tenant, key };
}

const review = (mail: Record<string, unknown>) =>
  graph({
    // two fields: a query alone fills neither (RAGFlow fills a Begin of one field with it)
    begin: ['Begin', { mode: 'conversational', inputs: { manager: { name: 'Manager', type: 'line', optional: true }, note: { name: 'Note', type: 'line', optional: true } } }, ['UserFillUp:Review']],
    'UserFillUp:Review': [
      'UserFillUp',
      {
        tips: 'Refund order {sys.query}?',
        form_link_email: mail,
        decisions: [
          { id: 'approve', label: 'Approve', to: 'Message:Yes' },
          { id: 'reject', label: 'Reject', to: 'Message:No' },
        ],
      },
      ['Message:Yes', 'Message:No'],
    ],
    'Message:Yes': ['Message', { content: ['Refunded.'] }],
    'Message:No': ['Message', { content: ['Refused.'] }],
  });

async function workflow(key: string, dsl: unknown): Promise<string> {
  const created = await api.call('POST', '/workflows/v1/workflows', { key, body: { name: 'refunds', dsl } });
  expect(created.status).toBe(201);
  return created.json.id as string;
}

/** The link's token, from a mail's body. */
const tokenIn = (body: string) => /https:\/\/forms\.example\/playground\/form#(fl1\.[A-Za-z0-9_.-]+)/.exec(body)?.[1];

describe('form links by e-mail', () => {
  it('go once the pausing turn commits, to the literal and referenced addresses, and the link in the mail answers the form', async () => {
    const { tenant, key } = await tenantWithMail();
    const wf = await workflow(key, review({ to: ['desk@example.com', '{begin@manager}'] }));
    const first = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, body: { run_input: { query: 'A-17', inputs: { manager: 'ada@example.com' } } } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, form_link_email: { status: 'sending', recipients: 2 } });

    expect(smtp.mails).toHaveLength(1);
    const mail = smtp.mails[0]!;
    expect(mail.recipients).toEqual(['desk@example.com', 'ada@example.com']);
    expect(mail.headers.from).toBe(`Refund desk <${SENDER}>`);
    expect(mail.headers.subject).toBe('A form is waiting for your answer');
    expect(mail.body).toContain('<p>Refund order A-17?</p>');
    const token = tokenIn(mail.body);
    expect(token).toBeDefined();
    // the mark says it went, to whom
    expect(await getPauseMail(engine.store, { tenant, runId: first.json.run_id, turn: 1, componentId: 'UserFillUp:Review' })).toMatchObject({ status: 'sent', accepted: ['desk@example.com', 'ada@example.com'] });

    const shown = await api.call('GET', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token! } });
    expect(shown.json).toMatchObject({ tips: 'Refund order A-17?', turn_number: 1 });
    expect(mail.body).toContain(`until ${shown.json.expires_at}`);
    const answered = await api.call('POST', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token! }, body: { inputs: { decision: 'approve' } } });
    expect(answered.json).toEqual({ answered: true, status: 'completed', turn_number: 2 });
    expect(smtp.mails).toHaveLength(1);
  });

  it('go once per turn: a request retried with its Idempotency-Key sends nothing more', async () => {
    const { key } = await tenantWithMail();
    const wf = await workflow(key, review({ to: 'desk@example.com', subject: 'Refund {sys.query} waits', body: '<p>Order <b>{sys.query}</b>: <a href="{form_link}">answer</a> by {expires_at}.</p>' }));
    const send = () => api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, headers: { 'idempotency-key': 'refund-a-18-first-turn-000000000001' }, body: { run_input: { query: '<A-18>' } } });
    const first = await send();
    const again = await send();
    expect(again.text).toBe(first.text);
    expect(smtp.mails).toHaveLength(1);
    // the subject and body as written, the query's markup escaped in the body
    expect(smtp.mails[0]!.headers.subject).toBe('Refund <A-18> waits');
    expect(smtp.mails[0]!.body).toMatch(/^<p>Order <b>&lt;A-18&gt;<\/b>: <a href="https:\/\/forms\.example\/playground\/form#fl1\.[^"]+">answer<\/a> by \d{4}-\d\d-\d\dT[\d:.]+Z\.<\/p>$/);
  });

  it('a first sender that met a transient failure leaves the mail to the retry, which sends it once', async () => {
    const { tenant, key } = await tenantWithMail();
    const wf = await workflow(key, review({ to: 'desk@example.com' }));
    // every attempt of the first sender is refused for now (421), the Email tool's three included
    smtp.enqueue(...Array.from({ length: 3 }, () => ({ kind: 'refuse' as const, at: 'mail' as const, code: 421, message: 'try again later' })));
    const send = () => api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, headers: { 'idempotency-key': 'refund-a-19-first-turn-000000000001' }, body: { run_input: { query: 'A-19' } } });
    const first = await send();
    // the turn committed all the same, and says the link was being sent
    expect(first.json).toMatchObject({ status: 'waiting_for_input', form_link_email: { status: 'sending', recipients: 1 } });
    expect(smtp.mails).toHaveLength(0);
    expect(await getPauseMail(engine.store, { tenant, runId: first.json.run_id, turn: 1, componentId: 'UserFillUp:Review' })).toMatchObject({ status: 'retry', error: expect.stringContaining('421') });

    expect((await send()).text).toBe(first.text);
    expect((await send()).text).toBe(first.text);
    expect(smtp.mails).toHaveLength(1);
    expect(await getPauseMail(engine.store, { tenant, runId: first.json.run_id, turn: 1, componentId: 'UserFillUp:Review' })).toMatchObject({ status: 'sent' });
  });

  it('go once per turn from a queued turn delivered twice', async () => {
    const { tenant, key } = await tenantWithMail();
    const wf = await workflow(key, review({ to: 'desk@example.com' }));
    const body = JSON.stringify({ tenant, workflow_id: wf, run_input: { query: 'A-20' }, idempotency_key: 'nightly-refunds:2026-06-01' });
    const deps = { engine, guard: new SsrfGuard() };
    const once = await processMessage(deps, body, { messageId: 'message-a-20' });
    const twice = await processMessage(deps, body, { messageId: 'message-a-20' });
    expect(once).toMatchObject({ kind: 'done', status: 'waiting_for_input' });
    expect(twice).toMatchObject({ kind: 'done', runId: (once as { runId: string }).runId });
    expect(smtp.mails).toHaveLength(1);
    expect(smtp.mails[0]!.recipients).toEqual(['desk@example.com']);
  });

  it.each([
    ['no e-mail configured', null, PASSWORD, 'e-mail is not configured: set the tenant secret SMTP_SETTINGS'],
    ['no password', SETTINGS, null, 'e-mail is not configured: the tenant secret SMTP_PASSWORD (the SMTP password) is not set'],
    ['settings the Email tool refuses', () => ({ ...SETTINGS(), smtp_port: 25, password: 'hunter2' }), PASSWORD, 'the tenant secret SMTP_SETTINGS does not fit the Email tool: smtp_port: SMTP port 25 is not supported'],
  ])('with %s, the pause happens and the response says why the link was not sent', async (_case, settings, password, reason) => {
    const { key } = await tenantWithMail(settings ? settings() : null, password);
    const wf = await workflow(key, review({ to: 'desk@example.com' }));
    const first = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, body: { run_input: { query: 'A-21' } } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, next_input_hint: { component_id: 'UserFillUp:Review' } });
    expect(first.json.form_link_email.status).toBe('not_sent');
    expect(first.json.form_link_email.reason).toContain(reason);
    expect(smtp.connections).toBe(0);
  });

  it('without an address, the pause happens and the response names what gave none; a bad one is left out and said', async () => {
    const { key } = await tenantWithMail();
    const none = await workflow(key, review({ to: '{begin@manager}' }));
    const first = await api.call('POST', `/workflows/v1/workflows/${none}/execute`, { key, body: { run_input: { query: 'A-22' } } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', form_link_email: { status: 'not_sent', reason: 'the form gave no address to send its link to: {begin@manager} gave no address' } });
    expect(smtp.connections).toBe(0);

    const some = await workflow(key, review({ to: ['desk@example.com', '{begin@manager}'] }));
    const second = await api.call('POST', `/workflows/v1/workflows/${some}/execute`, { key, body: { run_input: { query: 'A-23', inputs: { manager: 'not an address' } } } });
    expect(second.json.form_link_email).toEqual({ status: 'sending', recipients: 1, problems: ['{begin@manager} gave "not an address", which is not an e-mail address'] });
    expect(smtp.mails.map((m) => m.recipients)).toEqual([['desk@example.com']]);
  });

  it('are refused at import when asked for wrongly, naming the field', async () => {
    const { key } = await tenantWithMail(null, null);
    for (const mail of [{ to: [] }, { to: 'desk@example.com', expires_in_seconds: 5 }, { to: 'desk@example.com', cc: 'x' }]) {
      const res = await api.call('POST', '/workflows/v1/workflows', { key, body: { name: 'bad', dsl: review(mail) } });
      expect(res.status, JSON.stringify(mail)).toBe(400);
      expect(JSON.stringify(res.json)).toContain('form_link_email');
    }
  });
});
