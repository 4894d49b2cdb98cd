/**
 * Quotas over real HTTP: 429 `rate_limited` with Retry-After on the native API, RAGFlow's
 * envelope (code 103) with Retry-After on /api/v1, and the run-start limit of a bare execute key
 * per client address (from the socket; X-Forwarded-For only behind configured proxies) and per key.
 */
import { randomBytes } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { APIGatewayProxyResultV2 } from 'aws-lambda';
import type { Context } from 'hono';
import { handle } from 'hono/aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../lib/http/app';
import { createAuthenticator } from '../../lib/http/auth';
import { forwardedFor, lambdaSourceIp } from '../../lib/http/client-address';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import type { TurnEngine } from '../../lib/turns/execute';
import type { QuotaLimits } from '../../lib/turns/quotas';
import { functionUrlEvent, httpApiEvent, invocationContext } from '../functions/lambda-events';
import { endUserToken, makeEmbedSecret } from '../helpers/end-users';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { fixedMinute } from './clock';

const PURE = {
  components: {
    begin: { obj: { component_name: 'Begin', params: { mode: 'conversational', prologue: 'Hi' } }, downstream: ['Message:Echo'], upstream: [] },
    'Message:Echo': { obj: { component_name: 'Message', params: { content: ['You said: {sys.query}'] } }, downstream: [], upstream: ['begin'] },
  },
};

const socket = (c: Context) => getConnInfo(c).remote.address;
const servers: Served[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

/** The app with quotas on a fixed clock, a workflow, and an execute key limited to it. */
async function served(limits: QuotaLimits, proxyHops = 0): Promise<{ api: Served; workflowId: string; executeKey: string }> {
  const at = fixedMinute();
  const base = testEngine();
  const engine: TurnEngine = { ...base, store: { ...base.store, now: () => at }, clock: () => at, quotas: { limits } };
  const api = await serveApp(engine, { clientAddress: forwardedFor(socket, proxyHops) });
  servers.push(api);
  const workflowId = await newWorkflow(engine, api.tenant, PURE);
  return { api, workflowId, executeKey: await api.addKey(api.tenant, 'execute', [workflowId]) };
}

describe('turns per minute over HTTP', () => {
  it('answers the 61st turn of a key 429 with Retry-After; the native and RAGFlow APIs both; another end user and another key go on', async () => {
    const { api, workflowId, executeKey } = await served({ userTurnsPerMinute: 60 });
    const execute = (key: string, body: unknown, headers: Record<string, string> = {}) => api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { key, body, headers });
    // a bare key's visitor: its turns count on the key
    let runId: string | undefined;
    let runToken = '';
    for (let turn = 1; turn <= 60; turn++) {
      const r = await execute(executeKey, { ...(runId ? { run_id: runId, turn_number: turn - 1 } : {}), run_input: { query: `q${turn}` } }, runId ? { 'easel-run-token': runToken } : {});
      expect(r.status).toBe(200);
      runId = r.json.run_id;
      runToken ||= String(r.headers.get('easel-run-token'));
    }
    const refused = await execute(executeKey, { run_id: runId, turn_number: 60, run_input: { query: 'one more' } }, { 'easel-run-token': runToken });
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({ code: 'rate_limited', error: expect.stringMatching(/60 turns a minute for this API key/), limit: 'user_turns_per_minute', retry_after: 55 });
    expect(refused.headers.get('retry-after')).toBe('55');
    // streamed: refused before the first event, so a plain 429 as well
    const streamed = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { key: executeKey, body: { run_input: { query: 'x' } }, headers: { accept: 'text/event-stream' } });
    expect(streamed.status).toBe(429);
    expect(streamed.headers.get('retry-after')).toBe('55');

    // an end user of the same key has a budget of their own: alice spends hers natively...
    const embed = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);
    const alice = endUserToken(embed, { sub: 'alice', workflows: [workflowId] });
    let aliceRun: string | undefined;
    for (let turn = 1; turn <= 60; turn++) {
      const r = await execute(executeKey, { ...(aliceRun ? { run_id: aliceRun, turn_number: turn - 1 } : {}), run_input: { query: `a${turn}` } }, { 'easel-end-user-token': alice });
      expect(r.status).toBe(200);
      aliceRun = r.json.run_id;
    }
    // ...and RAGFlow's routes then answer her the envelope with code 103, HTTP 200 as for its other errors, and Retry-After
    const ragflow = [
      ['completions', `/api/v1/agents/${workflowId}/completions`, { question: 'hi', stream: false }],
      ['completions, streamed', `/api/v1/agents/${workflowId}/completions`, { question: 'hi', stream: true }],
      ['chat/completions', '/api/v1/agents/chat/completions', { agent_id: workflowId, question: 'hi', stream: false }],
      ['OpenAI-compatible', `/api/v1/agents_openai/${workflowId}/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }] }],
    ] as const;
    for (const [label, path, body] of ragflow) {
      const r = await api.call('POST', path, { key: `${executeKey}.${alice}`, body });
      expect(r.status, label).toBe(200);
      expect(r.json, label).toEqual({ code: 103, message: expect.stringMatching(/60 turns a minute for this end user.*retry in 55 s/) });
      expect(r.headers.get('retry-after'), label).toBe('55');
    }
    // bob, on the same key, is not affected; nor another key, nor the admin key (the tenant's, no subject)
    const bob = endUserToken(embed, { sub: 'bob', workflows: [workflowId] });
    expect((await api.call('POST', `/api/v1/agents/${workflowId}/completions`, { key: `${executeKey}.${bob}`, body: { question: 'hi', stream: false } })).json.code).toBe(0);
    expect((await execute(executeKey, { run_input: { query: 'hello' } }, { 'easel-end-user-token': bob })).status).toBe(200);
    const otherKey = await api.addKey(api.tenant, 'execute', [workflowId]);
    expect((await execute(otherKey, { run_input: { query: 'hello' } })).status).toBe(200);
    expect((await execute(api.adminKey, { run_input: { query: 'hello' } })).status).toBe(200);
  });
});

describe('runs started by an execute key alone', () => {
  /** `n` first turns, `parallel` at a time, each with its own X-Forwarded-For from `forwarded`. */
  async function openRuns(api: Served, workflowId: string, key: string, n: number, forwarded: (i: number) => string, parallel = 10) {
    const answers: { status: number; limit?: string; retryAfter: string | null }[] = [];
    for (let i = 0; i < n; i += parallel) {
      answers.push(...await Promise.all(Array.from({ length: Math.min(parallel, n - i) }, async (_, j) => {
        const r = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { key, body: { run_input: { query: 'hi' } }, headers: { 'x-forwarded-for': forwarded(i + j) } });
        return { status: r.status, ...(r.json?.limit ? { limit: r.json.limit } : {}), retryAfter: r.headers.get('retry-after') };
      })));
    }
    return answers;
  }

  it('one visitor opening 100 runs is refused past the limit of its address, whatever X-Forwarded-For it sends', async () => {
    const { api, workflowId, executeKey } = await served({ runsPerAddressPerMinute: 10, runsPerKeyPerMinute: 50 });
    const answers = await openRuns(api, workflowId, executeKey, 100, (i) => `198.51.100.${i}`);
    const accepted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    console.log(`100 runs from one address, 10 at a time: ${accepted} started, ${refused.length} refused (${[...new Set(refused.map((a) => a.limit))].join(', ')})`);
    expect(accepted).toBe(10);
    expect(refused).toHaveLength(90);
    for (const a of refused) expect(a).toEqual({ status: 429, limit: 'runs_per_address_per_minute', retryAfter: '55' });
    // RAGFlow's routes do not start runs for an execute key alone: it needs an end-user token there
    const session = await api.call('POST', `/api/v1/agents/${workflowId}/sessions`, { key: executeKey, body: {} });
    expect(session.json).toMatchObject({ code: 109, message: expect.stringContaining('end-user token') });
    // an admin key is not limited
    const admin = await openRuns(api, workflowId, api.adminKey, 12, () => '198.51.100.1');
    expect(admin.every((a) => a.status === 200)).toBe(true);
  });

  it('behind one trusted proxy, addresses come from X-Forwarded-For, and the key has its own limit', async () => {
    const { api, workflowId, executeKey } = await served({ runsPerAddressPerMinute: 10, runsPerKeyPerMinute: 25 }, 1);
    // ten visitors behind the proxy, ten runs each: within each address's limit, past the key's
    const answers = await openRuns(api, workflowId, executeKey, 100, (i) => `203.0.113.250, 192.0.2.${i % 10}`);
    const accepted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    console.log(`100 runs from ten forwarded addresses: ${accepted} started, ${refused.length} refused (${[...new Set(refused.map((a) => a.limit))].join(', ')})`);
    expect(accepted).toBe(25);
    for (const a of refused) expect(a.limit).toBe('runs_per_key_per_minute');
  });
});

describe('the client address on Lambda', () => {
  it('is the event\'s requestContext source address (HTTP API and Function URL), not X-Forwarded-For', async () => {
    const at = fixedMinute();
    const base = testEngine();
    const engine: TurnEngine = { ...base, store: { ...base.store, now: () => at }, clock: () => at, quotas: { limits: { runsPerAddressPerMinute: 2 } } };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    const secret = `test-execute-${randomBytes(16).toString('hex')}`;
    await putApiKey(engine.store, { tenant, id: randomBytes(8).toString('hex'), name: 'embed', scope: 'execute', workflowIds: [workflowId], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
    const serve = handle(createApp({ engine, auth: createAuthenticator(engine.store, { cacheMs: 0 }), clientAddress: forwardedFor(lambdaSourceIp, 0) }));
    const start = async (kind: 'http' | 'url', sourceIp: string) => {
      const options = { key: secret, body: { run_input: { query: 'hi' } }, headers: { 'x-forwarded-for': `10.0.0.${Math.floor(Math.random() * 250)}` } };
      const event = kind === 'http' ? httpApiEvent('POST', `/workflows/v1/workflows/${workflowId}/execute`, options) : functionUrlEvent('POST', `/workflows/v1/workflows/${workflowId}/execute`, options);
      event.requestContext.http.sourceIp = sourceIp;
      const result = (await serve(event as never, invocationContext('http'))) as APIGatewayProxyResultV2 & { statusCode: number; headers: Record<string, string> };
      return { status: result.statusCode, retryAfter: result.headers['retry-after'] };
    };
    expect((await start('http', '198.51.100.20')).status).toBe(200);
    expect((await start('url', '198.51.100.20')).status).toBe(200);
    expect(await start('http', '198.51.100.20')).toEqual({ status: 429, retryAfter: '55' });
    expect(await start('url', '198.51.100.20')).toEqual({ status: 429, retryAfter: '55' });
    expect((await start('url', '198.51.100.21')).status).toBe(200);
  });
});
