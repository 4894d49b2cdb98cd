/**
 * Begin's webhook mode through the app, on a real HTTP server and DynamoDB Local: importing a
 * webhook workflow (its token moved into the tenant's secrets on every import path), deliveries
 * and their credentials, the body's schema, the two answers (Accepted on the in-process queue,
 * Final), redeliveries that run nothing, and a workflow that is not in webhook mode. What the
 * run reaches outside is counted on a target server that records every request.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { getVersion } from '../../lib/store/workflows';
import type { TurnEngine } from '../../lib/turns/execute';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { startTarget, type TargetServer } from '../helpers/target-server';

const PUBLIC = 'https://hooks.example.com/prod';
const TOKEN = `tok-${randomBytes(16).toString('hex')}`;
/** One fixed instant for the app whose rate limits and JWT times are checked. */
const T0 = Date.parse('2031-05-06T12:00:00Z');

let engine: TurnEngine;
let secrets: TenantSecrets;
let api: Served;
let timed: Served;
let target: TargetServer;
let queue: ReturnType<typeof createInProcessQueue>;

const socketAddress = (c: Context) => getConnInfo(c).remote.address;

beforeAll(async () => {
  target = await startTarget();
  engine = testEngine({ allow: ['127.0.0.1'] });
  secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  const guard = new SsrfGuard({ allow: ['127.0.0.1'] });
  queue = createInProcessQueue((records) => processBatch({ engine, guard }, records), { retryDelayMs: 20 });
  api = await serveApp(engine, { enqueue: queue.enqueue, secrets, publicUrl: PUBLIC, clientAddress: socketAddress });
  timed = await serveApp({ ...engine, clock: () => T0 }, { enqueue: queue.enqueue, secrets, clientAddress: socketAddress });
});

afterAll(async () => {
  await queue?.idle();
  await api?.close();
  await timed?.close();
  await target?.close();
});

/** Requests the target got on `path` (each test has its own). */
const calls = (path: string) => target.requests.filter((r) => r.path === path).length;

const ORDER_SCHEMA = {
  body: {
    type: 'object',
    properties: {
      order_id: { type: 'string' },
      quantity: { type: 'integer' },
      tier: { type: 'string', enum: ['free', 'pro'] },
      customer: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      tags: { type: 'array<string>' },
    },
    required: ['order_id', 'customer'],
  },
  headers: { properties: { 'X-Event': { type: 'string' } } },
  query: { properties: { dry: { type: 'boolean' } } },
};

/** A webhook workflow: Begin (token auth unless `begin` says otherwise) -> Invoke the target at `path` -> Message. */
function hookDsl(path: string, begin: Record<string, unknown> = {}, content = 'Order {begin@body.order_id} x{begin@body.quantity} for {begin@body.customer.name} ({begin@headers.X-Event}, dry {begin@query.dry}): {Invoke:Notify@result}') {
  return graph({
    begin: ['Begin', {
      mode: 'Webhook',
      methods: ['POST'],
      content_types: 'application/json',
      security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: TOKEN } },
      schema: ORDER_SCHEMA,
      execution_mode: 'Streaming',
      ...begin,
    }, ['Invoke:Notify']],
    'Invoke:Notify': ['Invoke', { url: `${target.url}${path}`, method: 'post', variables: [{ key: 'order', ref: 'begin@body.order_id' }], timeout: 5, max_retries: 0 }, ['Message:Done']],
    'Message:Done': ['Message', { content: [content] }],
  });
}

const ORDER = { order_id: 'A-17', quantity: '3', customer: { name: 'Ada' }, tags: ['x'], extra: 'dropped' };

async function createHook(dsl: unknown, on: Served = api): Promise<{ id: string; url: string; created: Awaited<ReturnType<Served['call']>> }> {
  const created = await on.call('POST', '/workflows/v1/workflows', { body: { name: `hook ${randomBytes(3).toString('hex')}`, dsl } });
  expect(created.status, created.text).toBe(201);
  const shown = created.json.webhook_url as string;
  // deliveries go to this server, at the path the public URL names
  const path = on === api ? shown.slice(PUBLIC.length) : shown;
  expect(path).toMatch(/^\/workflows\/v1\/webhooks\/wh_[0-9a-f]{32}$/);
  return { id: created.json.id, url: `${on.url}${path}`, created };
}

async function deliver(url: string, body: unknown, headers: Record<string, string> = {}, method = 'POST') {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const withToken = (extra: Record<string, string> = {}) => ({ 'x-hook-token': TOKEN, 'x-event': 'order.paid', ...extra });

describe('importing a webhook workflow', () => {
  it('moves the token into the tenant\u2019s secrets: no stored DSL and no answer carries it', async () => {
    const dsl = hookDsl('/import');
    // RAGFlow's editor keeps a second copy of the form in the graph
    (dsl as Record<string, unknown>).graph = { nodes: [{ id: 'begin', data: { name: 'Begin', form: structuredClone((dsl.components as any).begin.obj.params) } }], edges: [] };
    const { id, created } = await createHook(dsl);
    expect(created.text).not.toContain(TOKEN);
    expect(created.json.webhook_url).toMatch(/^https:\/\/hooks\.example\.com\/prod\/workflows\/v1\/webhooks\/wh_[0-9a-f]{32}$/);

    const stored = (await getVersion(engine.store, api.tenant, id, 1)) as any;
    expect(JSON.stringify(stored)).not.toContain(TOKEN);
    const token = stored.components.begin.obj.params.security.token;
    expect(token).toEqual({ token_header: 'X-Hook-Token', token_ref: expect.stringMatching(/^whs_[0-9a-f]{24}$/) });
    expect(stored.graph.nodes[0].data.form.security.token).toEqual(token);
    // kept as a salted hash, under a name the secrets API neither lists nor resolves
    const kept = await secrets.getReserved(api.tenant, `~webhook.${token.token_ref}`);
    expect(kept).toBeDefined();
    expect(kept).not.toContain(TOKEN);
    expect(JSON.parse(kept as string)).toMatchObject({ kind: 'token', hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect((await api.call('GET', '/workflows/v1/secrets')).json.items).toEqual([]);

    for (const path of [`/workflows/v1/workflows/${id}`, `/api/v1/agents/${id}`, '/api/v1/agents']) {
      const read = await api.call('GET', path);
      expect(read.status).toBe(200);
      expect(read.text).not.toContain(TOKEN);
    }
    expect((await api.call('GET', `/workflows/v1/workflows/${id}`)).json.webhook_url).toBe(created.json.webhook_url);
    expect((await api.call('GET', `/api/v1/agents/${id}`)).json.data.webhook_url).toBe(created.json.webhook_url);
  });

  it('does the same through RAGFlow\u2019s POST and PUT /api/v1/agents; a DSL sent back with its reference keeps the token', async () => {
    const title = `rf hook ${randomBytes(3).toString('hex')}`;
    const posted = await api.call('POST', '/api/v1/agents', { body: { title, dsl: hookDsl('/rf') } });
    expect(posted.json.code, posted.text).toBe(0);
    expect(posted.text).not.toContain(TOKEN);
    const agent = posted.json.data;
    const url = `${api.url}${(agent.webhook_url as string).slice(PUBLIC.length)}`;
    expect((await deliver(url, ORDER, withToken())).status).toBe(200);
    // RAGFlow's own path reaches the same webhook
    expect((await deliver(`${api.url}/api/v1/agents/${agent.id}/webhook`, ORDER, withToken())).status).toBe(200);

    // the DSL as read back (a reference, no token) keeps authenticating with the same token
    expect((await api.call('PUT', `/api/v1/agents/${agent.id}`, { body: { dsl: agent.dsl } })).json.code).toBe(0);
    expect((await deliver(url, ORDER, withToken())).status).toBe(200);

    // a new token replaces it
    const NEW = `new-${randomBytes(16).toString('hex')}`;
    const next = hookDsl('/rf');
    (next.components as any).begin.obj.params.security.token.token_value = NEW;
    const put = await api.call('PUT', `/api/v1/agents/${agent.id}`, { body: { dsl: next } });
    expect(put.json.code).toBe(0);
    const read = await api.call('GET', `/api/v1/agents/${agent.id}`);
    expect(read.text).not.toContain(NEW);
    expect((await deliver(url, ORDER, withToken())).status).toBe(401);
    expect((await deliver(url, ORDER, { ...withToken(), 'x-hook-token': NEW })).status).toBe(200);
  });

  it('refuses a reference to no stored token, credentials copied elsewhere, and settings Easel does not support, naming the field', async () => {
    const refused = async (dsl: unknown) => {
      const res = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'refused', dsl } });
      expect(res.status, res.text).toBe(400);
      expect(res.json.code).toBe('invalid_dsl');
      expect(res.text).not.toContain(TOKEN);
      return (res.json.problems as { component_id?: string; field?: string; message: string }[]).map((p) => `${p.field}: ${p.message}`).join('\n');
    };
    expect(await refused(hookDsl('/x', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_ref: `whs_${'0'.repeat(24)}` } } })))
      .toContain('obj.params.security.token.token_ref: names no token credential of this tenant');
    expect(await refused(hookDsl('/x', {}, `the token is ${TOKEN}`))).toContain('components.Message:Done.obj.params.content.0: holds a webhook credential');
    expect(await refused(hookDsl('/x', { security: { auth_type: 'oauth2' } }))).toContain('obj.params.security.auth_type: must be one of none, token, basic, jwt');
    expect(await refused(hookDsl('/x', { security: { auth_type: 'jwt', jwt: { secret: 's3cret', algorithm: 'RS256' } } }))).toContain('obj.params.security.jwt.algorithm: must be one of HS256, HS384, HS512');
    expect(await refused(hookDsl('/x', { schema: { body: { properties: { doc: { type: 'file' } } } } }))).toContain('obj.params.schema.body.properties.doc.type: file fields are not supported');
    expect(await refused(hookDsl('/x', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token' } } }))).toContain('obj.params.security.token.token_value: is required');
    expect(await refused(hookDsl('/x', { response: { status: 500 } }))).toContain('obj.params.response.status: must be between 200 and 399');
    expect(await refused(hookDsl('/x', { schema: { headers: { properties: { 'x-hook-token': { type: 'string' } } } } }))).toContain('never passed to the workflow');
    expect(await refused(hookDsl('/x', { execution_mode: 'Immediately', response: { body_template: '{"done": "{Message:Done@content}"}' } }))).toContain('an "Immediately" answer goes out before the run');
  });
});

describe('deliveries', () => {
  it('run with the right token; a wrong or missing one is 401 and runs nothing', async () => {
    const { url } = await createHook(hookDsl('/auth'));
    const ok = await deliver(`${url}?dry=true`, ORDER, withToken());
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toMatchObject({ success: true, code: 200, status: 'completed', message: 'Order A-17 x3 for Ada (order.paid, dry true): {"ok":true,"n":' + String(target.requests.length) + '}' });
    expect(ok.headers.get('easel-run-id')).toBe(ok.json.run_id);
    expect(calls('/auth')).toBe(1);
    for (const headers of [{ ...withToken(), 'x-hook-token': `${TOKEN}x` }, { 'x-event': 'order.paid' }, { authorization: `Bearer ${api.adminKey}` }] as Record<string, string>[]) {
      const refused = await deliver(url, ORDER, headers);
      expect(refused.status).toBe(401);
      expect(refused.json).toMatchObject({ code: 'unauthorized', error: 'Invalid token authentication' });
    }
    expect(calls('/auth')).toBe(1);
    // a method or content type the Begin does not take
    expect((await deliver(url, undefined, withToken(), 'GET')).json).toMatchObject({ code: 'invalid_request', error: "HTTP method 'GET' not allowed for this webhook." });
    expect((await deliver(url, 'a=1', { ...withToken(), 'content-type': 'application/x-www-form-urlencoded' })).json).toMatchObject({ code: 'invalid_request', field: 'Content-Type' });
  });

  it('belong to the tenant: admin keys see the run, its turn names the webhook, and no turn record carries the token', async () => {
    const { url } = await createHook(hookDsl('/owner'));
    const ok = await deliver(url, ORDER, withToken());
    const hookId = url.split('/').pop();
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${ok.json.run_id}`);
    expect(run.json).toMatchObject({ status: 'completed', is_terminal: true });
    expect(run.json.user_id ?? null).toBeNull();
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${ok.json.run_id}/turns`);
    expect(turns.json.items[0].request.actor).toEqual({ kind: 'webhook', id: hookId });
    // Begin's outputs are the delivery as its schema kept it: undeclared fields and headers are dropped
    expect(turns.json.items[0].request.run_input.webhook_payload).toEqual({
      query: { dry: false },
      headers: { 'X-Event': 'order.paid' },
      body: { order_id: 'A-17', quantity: 3, tier: '', customer: { name: 'Ada' }, tags: ['x'] },
    });
    expect(turns.text).not.toContain(TOKEN);
  });

  it('answer 400 naming each field the schema refuses, and run nothing', async () => {
    const { url } = await createHook(hookDsl('/schema'));
    const cases: [unknown, string, string][] = [
      [{ customer: { name: 'Ada' } }, 'body.order_id', 'body.order_id: is required'],
      [{ order_id: 'A', customer: {} }, 'body.customer.name', 'body.customer.name: is required'],
      [{ order_id: 'A', customer: { name: 'Ada' }, quantity: 'three' }, 'body.quantity', 'body.quantity: expected integer, got string "three"'],
      [{ order_id: 'A', customer: { name: 'Ada' }, tier: 'gold' }, 'body.tier', 'body.tier: must be one of "free", "pro"'],
      [{ order_id: 'A', customer: { name: 'Ada' }, tags: [1, 2] }, 'body.tags.0', 'body.tags.0: expected string, got number 1'],
      [[1, 2], 'body', 'body: must be an object, got an array'],
      ['{not json', 'body', 'the body is not valid JSON'],
      [`${'['.repeat(70)}${']'.repeat(70)}`, 'body', 'the body nests deeper than 64 levels'],
    ];
    for (const [body, field, error] of cases) {
      const res = await deliver(url, body, withToken());
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json).toMatchObject({ code: 'invalid_request', field, error });
    }
    const query = await deliver(`${url}?dry=maybe`, ORDER, withToken());
    expect(query.json).toMatchObject({ field: 'query.dry', error: 'query.dry: expected boolean, got string "maybe"' });
    expect(calls('/schema')).toBe(0);
  });

  it('Accepted (Immediately): 202 with the run id at once; the worker runs and commits it', async () => {
    const { url } = await createHook(hookDsl('/accepted', { execution_mode: 'Immediately' }));
    const res = await deliver(url, ORDER, withToken());
    expect(res.status, res.text).toBe(202);
    expect(res.json).toEqual({ run_id: expect.stringMatching(/^[0-9a-f]{32}$/), turn_number: 1, status: 'running' });
    expect(res.headers.get('location')).toBe(`/workflows/v1/workflow-runs/${res.json.run_id}`);
    await queue.idle();
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${res.json.run_id}`);
    expect(run.json).toMatchObject({ status: 'completed', turn_number: 1 });
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${res.json.run_id}/turns/1`);
    expect(turn.json.request.actor.kind).toBe('webhook');
    expect(turn.json.response.events.find((e: { event: string }) => e.event === 'message').data.content).toMatch(/^Order A-17 x3 for Ada/);
    expect(calls('/accepted')).toBe(1);

    // RAGFlow's response settings: its status, and a template showing the delivery
    const { url: templated } = await createHook(hookDsl('/accepted-2', { execution_mode: 'Immediately', response: { status: 200, body_template: '{"received": "{begin@body.order_id}", "customer": "{begin@body.customer}"}' } }));
    const custom = await deliver(templated, ORDER, withToken());
    expect(custom.status).toBe(200);
    expect(custom.json).toEqual({ received: 'A-17', customer: { name: 'Ada' } });
    expect(custom.headers.get('easel-run-id')).toMatch(/^[0-9a-f]{32}$/);
    await queue.idle();
    expect(calls('/accepted-2')).toBe(1);
  });

  it('Final (Streaming): the result as the response template says, with references to the run\u2019s outputs', async () => {
    const { url } = await createHook(hookDsl('/final', { response: { status: 201, body_template: '{"order": "{begin@body.order_id}", "text": "{Message:Done@content}", "seen": "{Invoke:Notify@result.ok}"}' } }));
    const res = await deliver(url, ORDER, withToken());
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.json).toEqual({ order: 'A-17', text: expect.stringMatching(/^Order A-17 x3 for Ada/), seen: true });
    const { url: plain } = await createHook(hookDsl('/final-text', { response: { body_template: 'thanks {begin@body.customer.name}' } }));
    const text = await deliver(plain, ORDER, withToken());
    expect(text.status).toBe(200);
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(text.text).toBe('thanks Ada');
  });

  it('a failed run answered Final is 422 workflow_failed with its run id', async () => {
    const dsl = hookDsl('/fails');
    (dsl.components as any)['Invoke:Notify'].obj.params.url = 'http://169.254.169.254/latest';
    const { url } = await createHook(dsl);
    const res = await deliver(url, ORDER, withToken());
    expect(res.status, res.text).toBe(422);
    expect(res.json).toMatchObject({ code: 'workflow_failed', status: 'failed', run_id: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });
});

describe('redeliveries', () => {
  it.each([
    ['X-GitHub-Delivery', { 'x-github-delivery': randomBytes(16).toString('hex') }],
    ['Idempotency-Key', { 'idempotency-key': `order-${randomBytes(8).toString('hex')}` }],
    ['X-Delivery-Id', { 'x-delivery-id': randomBytes(8).toString('hex') }],
  ])('with the same %s replay the first answer and run nothing (Final)', async (name, id) => {
    const path = `/dedup-${name.toLowerCase()}`;
    const { url } = await createHook(hookDsl(path));
    const first = await deliver(url, ORDER, withToken(id));
    const again = await deliver(url, ORDER, withToken(id));
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(calls(path)).toBe(1);
    // another delivery id is another delivery
    const other = await deliver(url, ORDER, withToken({ 'x-github-delivery': randomBytes(16).toString('hex') }));
    expect(other.json.run_id).not.toBe(first.json.run_id);
    expect(calls(path)).toBe(2);
    // the same id with another payload is a mistake of the sender's
    expect((await deliver(url, { ...ORDER, order_id: 'B-1' }, withToken(id))).json.code).toBe('idempotency_mismatch');
  });

  it('replay an Accepted answer without queueing the run again', async () => {
    const { url } = await createHook(hookDsl('/dedup-accepted', { execution_mode: 'Immediately' }));
    const id = { 'x-github-delivery': randomBytes(16).toString('hex') };
    const first = await deliver(url, ORDER, withToken(id));
    const during = await deliver(url, ORDER, withToken(id));
    await queue.idle();
    const after = await deliver(url, ORDER, withToken(id));
    await queue.idle();
    expect(first.status).toBe(202);
    expect(during.text).toBe(first.text);
    expect(after.text).toBe(first.text);
    expect(calls('/dedup-accepted')).toBe(1);
  });

  it('of one delivery id to two webhooks are two deliveries', async () => {
    const a = await createHook(hookDsl('/two-a'));
    const b = await createHook(hookDsl('/two-b'));
    const id = { 'x-github-delivery': randomBytes(16).toString('hex') };
    expect((await deliver(a.url, ORDER, withToken(id))).status).toBe(200);
    expect((await deliver(b.url, ORDER, withToken(id))).status).toBe(200);
    expect([calls('/two-a'), calls('/two-b')]).toEqual([1, 1]);
  });
});

describe('a workflow not in webhook mode', () => {
  it('answers its webhook URL 404 once its active version is not; an unknown URL is 404 too', async () => {
    const { id, url } = await createHook(hookDsl('/mode'));
    const task = graph({ begin: ['Begin', { mode: 'task' }, ['Message:M']], 'Message:M': ['Message', { content: ['hi'] }] });
    expect((await api.call('POST', `/workflows/v1/workflows/${id}/versions`, { body: { dsl: task } })).status).toBe(201);
    const res = await deliver(url, ORDER, withToken());
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ code: 'not_found', error: 'this workflow is not in webhook mode (its Begin\u2019s mode is "task")'.replace('\u2019', "'") });
    expect((await api.call('GET', `/workflows/v1/workflows/${id}`)).json.webhook_url).toBeUndefined();
    // rolling back makes it a webhook again, at the same URL
    await api.call('POST', `/workflows/v1/workflows/${id}/versions/1/activate`);
    expect((await deliver(url, ORDER, withToken())).status).toBe(200);

    const plain = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'plain', dsl: task } });
    expect(plain.json.webhook_url).toBeUndefined();
    expect((await deliver(`${api.url}/api/v1/agents/${plain.json.id}/webhook`, ORDER)).json).toMatchObject({ code: 'not_found' });
    expect((await deliver(`${api.url}/workflows/v1/webhooks/wh_${'0'.repeat(32)}`, ORDER)).status).toBe(404);
    expect((await deliver(`${api.url}/workflows/v1/webhooks/not-an-id`, ORDER)).status).toBe(404);
  });

  it('the delivery route is in the OpenAPI document', async () => {
    const doc = await api.call('GET', '/openapi.json', { key: null });
    expect(Object.keys(doc.json.paths)).toContain('/workflows/v1/webhooks/{webhook_id}');
  });
});

describe('other authentication', () => {
  it('Basic: the password is kept hashed; a wrong user or password is 401', async () => {
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const { id, url, created } = await createHook(hookDsl('/basic', { security: { auth_type: 'basic', basic_auth: { username: 'hooks', password } } }));
    expect(created.text).not.toContain(password);
    expect(JSON.stringify(await getVersion(engine.store, api.tenant, id, 1))).not.toContain(password);
    const basic = (user: string, pass: string) => ({ 'x-event': 'e', authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });
    expect((await deliver(url, ORDER, basic('hooks', password))).status).toBe(200);
    expect((await deliver(url, ORDER, basic('hooks', `${password}!`))).json).toMatchObject({ code: 'unauthorized', error: 'Invalid Basic Auth credentials' });
    expect((await deliver(url, ORDER, basic('other', password))).status).toBe(401);
    expect(calls('/basic')).toBe(1);
  });

  it('JWT (HS256): signature, expiry on the server\u2019s clock, audience, issuer and required claims', async () => {
    const secret = `jwt-${randomBytes(16).toString('hex')}`;
    const { id, url } = await createHook(hookDsl('/jwt', { security: { auth_type: 'jwt', jwt: { secret, audience: 'easel', issuer: 'shop', required_claims: ['order'] } } }), timed);
    expect(JSON.stringify(await getVersion(engine.store, timed.tenant, id, 1))).not.toContain(secret);
    const nowSec = Math.floor(T0 / 1000);
    const good = { aud: 'easel', iss: 'shop', order: 'A-17', exp: nowSec + 60 };
    const bearer = (claims: Record<string, unknown>, key = secret) => ({ 'x-event': 'e', authorization: `Bearer ${jwt(claims, key)}` });
    expect((await deliver(url, ORDER, bearer(good))).status).toBe(200);
    const refusals: [Record<string, string>, string][] = [
      [bearer(good, 'another secret'), 'Invalid JWT'],
      [bearer({ ...good, exp: nowSec - 1 }), 'Invalid JWT: Signature has expired'],
      [bearer({ ...good, aud: 'other' }), 'Invalid JWT: Audience'],
      [bearer({ ...good, iss: 'other' }), 'Invalid issuer'],
      [bearer({ aud: 'easel', iss: 'shop' }), 'Missing JWT claim: order'],
      [{ 'x-event': 'e' }, 'Missing Bearer token'],
    ];
    for (const [headers, error] of refusals) {
      const res = await deliver(url, ORDER, headers);
      expect(res.status, error).toBe(401);
      expect(res.json.error).toContain(error);
    }
    expect(calls('/jwt')).toBe(1);
  });

  it('anonymous only with allow_anonymous, and only at the webhook\u2019s own URL', async () => {
    const closed = await createHook(hookDsl('/anon-closed', { security: { auth_type: 'none' } }));
    expect((await deliver(closed.url, ORDER, { 'x-event': 'e' })).json).toMatchObject({ code: 'unauthorized', error: 'Anonymous webhook access requires allow_anonymous to be true' });
    const open = await createHook(hookDsl('/anon-open', { security: { auth_type: 'none', allow_anonymous: true } }));
    expect((await deliver(open.url, ORDER, { 'x-event': 'e' })).status).toBe(200);
    // an agent id is no secret
    expect((await deliver(`${api.url}/api/v1/agents/${open.id}/webhook`, ORDER, { 'x-event': 'e' })).status).toBe(401);
    // nor shown beside the workflow to anyone but an admin key
    const execute = await api.addKey(api.tenant, 'execute', [open.id]);
    expect((await api.call('GET', `/workflows/v1/workflows/${open.id}`, { key: execute })).json.webhook_url).toBeUndefined();
    const none = await createHook(hookDsl('/anon-none', { security: null }));
    expect((await deliver(none.url, ORDER, { 'x-event': 'e' })).json.error).toBe('Webhook security is required. Set allow_anonymous to true to permit unauthenticated webhooks.');
    expect([calls('/anon-closed'), calls('/anon-open'), calls('/anon-none')]).toEqual([0, 1, 0]);
  });

  it('an IP whitelist, a rate limit (on the server\u2019s clock) and a body size limit', async () => {
    const listed = await createHook(hookDsl('/ip', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: TOKEN }, ip_whitelist: ['10.0.0.0/8', '127.0.0.1'] } }));
    expect((await deliver(listed.url, ORDER, withToken())).status).toBe(200);
    const elsewhere = await createHook(hookDsl('/ip-no', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: TOKEN }, ip_whitelist: ['10.0.0.0/8'] } }));
    expect((await deliver(elsewhere.url, ORDER, withToken())).json).toMatchObject({ code: 'forbidden', error: 'IP 127.0.0.1 is not allowed by whitelist' });

    const limited = await createHook(hookDsl('/rate', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: TOKEN }, rate_limit: { limit: 2, per: 'hour' } } }), timed);
    expect((await deliver(limited.url, ORDER, withToken())).status).toBe(200);
    expect((await deliver(limited.url, ORDER, withToken())).status).toBe(200);
    const third = await deliver(limited.url, ORDER, withToken());
    expect(third.status).toBe(429);
    expect(third.json).toMatchObject({ code: 'rate_limited', limit: 'webhook_rate_limit', retry_after: 3600 });
    expect(third.headers.get('retry-after')).toBe('3600');
    expect(calls('/rate')).toBe(2);

    const small = await createHook(hookDsl('/size', { security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: TOKEN }, max_body_size: '1KB' } }));
    const big = await deliver(small.url, { ...ORDER, note: 'x'.repeat(2000) }, withToken());
    expect(big.status).toBe(413);
    expect(big.json.code).toBe('payload_too_large');
    expect(calls('/size')).toBe(0);
  });

  it('form bodies are read as text fields and cast to their declared types', async () => {
    const { url } = await createHook(hookDsl('/form', { content_types: ['application/x-www-form-urlencoded', 'application/json'], schema: { body: { properties: { order_id: { type: 'string' }, quantity: { type: 'number' }, customer: { type: 'object' } }, required: ['order_id'] } } }));
    const res = await deliver(url, 'order_id=F-1&quantity=2.5&customer=%7B%22name%22%3A%22Bo%22%7D', { ...withToken(), 'content-type': 'application/x-www-form-urlencoded' });
    expect(res.status, res.text).toBe(200);
    expect(res.json.message).toMatch(/^Order F-1 x2.5 for Bo/);
  });
});

/** An HS256 JWT, signed here. */
function jwt(claims: Record<string, unknown>, secret: string): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${head}.${createHmac('sha256', secret).update(head).digest('base64url')}`;
}

