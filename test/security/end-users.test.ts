/**
 * End users behind one public key (docs/access.md), driven by the route table like the fuzz
 * suite. One execute key K is shared by four visitors of a page: two with run tokens (each
 * started a run with the bare key and keeps its token) and two with end-user tokens (alice and
 * bob, signed with the tenant's embed secret). Every route that names a run, a session or a file
 * is tried by each visitor with another's id, and must answer exactly as for a missing id of
 * the same shape; listings show a visitor only their own; nothing of another's changes; the
 * admin key still reaches everything. A route added to the table without a probe fails here.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { processBatch } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { type EmbedSecret, endUserToken, makeEmbedSecret } from '../helpers/end-users';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { comparable, contractViolation, KeepAliveClient, type RawResponse, ROUTES } from './support';

const hex = (n: number) => randomBytes(Math.ceil(n / 2)).toString('hex').slice(0, n);

let api: Served;
let client: KeepAliveClient;
let queue: ReturnType<typeof createInProcessQueue>;
let embed: EmbedSecret;
let wf = '';
let fileWf = '';
let K = '';
let keyId = '';

/** One visitor of the page: what they send, and what is theirs. */
interface Visitor {
  name: string;
  /** Authorization on the native API. */
  native: string;
  /** Authorization on RAGFlow's routes (clients that send nothing else). */
  ragflow: string;
  headers: Record<string, string>;
  run: string;
  file: string;
  /** RAGFlow session (end users only; a bare key cannot open one). */
  session?: string;
}

const visitors: Visitor[] = [];
const [V1, V2, U1, U2] = [0, 1, 2, 3];

async function send(auth: string | null, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  const h: Record<string, string> = { ...headers };
  if (auth) h.authorization = `Bearer ${auth}`;
  let raw: string | undefined;
  if (body !== undefined) {
    raw = JSON.stringify(body);
    h['content-type'] ??= 'application/json';
  }
  const res = await client.send({ method, path, headers: h, ...(raw !== undefined ? { body: raw } : {}) });
  expect(contractViolation(path.startsWith('/api/v1/') ? 'ragflow' : 'native', res), `${method} ${path}`).toBeNull();
  return res;
}

function upload(auth: string, headers: Record<string, string> = {}, path = '/workflows/v1/files'): Promise<RawResponse> {
  const boundary = `b${hex(16)}`;
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="private.txt"\r\nContent-Type: text/plain\r\n\r\nmine alone ${hex(6)}\r\n--${boundary}--\r\n`;
  return client.send({ method: 'POST', path, headers: { ...headers, authorization: `Bearer ${auth}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
}

const token = (sub: string, extra: Record<string, unknown> = {}) => endUserToken(embed, { sub, workflows: [wf, fileWf], ...extra });

beforeAll(async () => {
  const engine = testEngine();
  const guard = new SsrfGuard({ allow: [], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  queue = createInProcessQueue((records) => processBatch({ engine, guard }, records), { retryDelayMs: 20 });
  api = await serveApp(engine, { enqueue: queue.enqueue, secrets: new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) }) });
  client = new KeepAliveClient(api.url, 6);
  wf = (await send(api.adminKey, 'POST', '/workflows/v1/workflows', { name: 'public form', dsl: fixture('form-intake') })).json.id;
  fileWf = (await send(api.adminKey, 'POST', '/workflows/v1/workflows', {
    name: 'upload a document',
    dsl: graph({
      begin: ['Begin', { mode: 'conversational', prologue: '' }, ['UserFillUp:Doc']],
      'UserFillUp:Doc': ['UserFillUp', { inputs: { doc: { name: 'Document', type: 'file', optional: false } } }, ['Message:Show']],
      'Message:Show': ['Message', { content: ['{UserFillUp:Doc@doc.name}: {UserFillUp:Doc@doc.text}'] }],
    }),
  })).json.id;
  const key = await send(api.adminKey, 'POST', '/workflows/v1/keys', { name: 'page', scope: 'execute', workflow_ids: [wf, fileWf] });
  K = key.json.key;
  keyId = key.json.id;
  embed = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);

  for (const name of ['visitor-1', 'visitor-2']) {
    const started = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: `${name} asks` } });
    expect(started.status).toBe(200);
    const runToken = String(started.headers['easel-run-token']);
    expect(runToken).toMatch(/^rt1\.[0-9a-f]{32}\./);
    const headers = { 'easel-run-token': runToken };
    const file = await upload(K, headers);
    expect(file.status).toBe(201);
    // an upload for a run is the run's: no file token
    expect(file.json.file_token).toBeUndefined();
    visitors.push({ name, native: K, ragflow: K, headers, run: started.json.run_id, file: file.json.file_id });
  }
  for (const name of ['alice', 'bob']) {
    const jwt = token(name);
    const headers = { 'easel-end-user-token': jwt };
    // a sent user_id never overrides the token's
    const started = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: `${name} asks`, user_id: 'someone-else' } }, headers);
    expect(started.status).toBe(200);
    const file = await upload(K, headers);
    expect(file.status).toBe(201);
    const session = await send(`${K}.${jwt}`, 'POST', `/api/v1/agents/${wf}/sessions`, { user_id: 'someone-else' });
    expect(session.json.code).toBe(0);
    expect(session.json.data.user_id).toBe(name);
    visitors.push({ name, native: K, ragflow: `${K}.${jwt}`, headers, run: started.json.run_id, file: file.json.file_id, session: session.json.data.id });
  }
});

afterAll(async () => {
  await queue?.idle();
  client?.close();
  await api?.close();
});

/** Each visitor's runs as the admin key sees them, to check nothing of theirs moved. */
async function snapshot(): Promise<string[]> {
  const out: string[] = [];
  for (const v of visitors) {
    for (const id of [v.run, ...(v.session ? [v.session] : [])]) {
      const run = (await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${id}`)).json;
      out.push(`${v.name} ${id} ${run.status} ${run.turn_number}`);
    }
  }
  return out;
}

/** A route's request, made with an id in place of its run/session/file/body reference. */
interface Probe {
  route: string;
  method: string;
  path: (id: string) => string;
  body?: (id: string) => unknown;
  headers?: Record<string, string>;
  /** What kind of id the probe puts in. */
  names: 'run' | 'session' | 'file';
}

const RUN_PROBES: Probe[] = [
  { route: 'GET /workflows/v1/workflow-runs/{run}', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}`, names: 'run' },
  { route: 'GET /workflows/v1/workflow-runs/{run}/turns', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}/turns`, names: 'run' },
  { route: 'GET /workflows/v1/workflow-runs/{run}/turns/{n}', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}/turns/1`, names: 'run' },
  { route: 'GET /workflows/v1/workflow-runs/{run}/turns/{n}', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}/turns/1?format=sse`, names: 'run' },
  { route: 'GET /workflows/v1/workflow-runs/{run}/turns/{n}/events', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}/turns/1/events`, names: 'run' },
  // follow
  { route: 'GET /workflows/v1/workflow-runs/{run}/turns/{n}/events', method: 'GET', path: (id) => `/workflows/v1/workflow-runs/${id}/turns/1/events?format=sse`, names: 'run' },
  { route: 'POST /workflows/v1/workflows/{wf}/runs/{run}/pump-companions', method: 'POST', path: (id) => `/workflows/v1/workflows/${wf}/runs/${id}/pump-companions`, names: 'run' },
  { route: 'DELETE /workflows/v1/workflow-runs/{run}', method: 'DELETE', path: (id) => `/workflows/v1/workflow-runs/${id}`, names: 'run' },
  { route: 'POST /workflows/v1/workflow-runs/{run}/form-links', method: 'POST', path: (id) => `/workflows/v1/workflow-runs/${id}/form-links`, body: () => ({}), names: 'run' },
  { route: 'POST /workflows/v1/workflow-runs/{run}/fork', method: 'POST', path: (id) => `/workflows/v1/workflow-runs/${id}/fork`, body: () => ({ turn_number: 1 }), names: 'run' },
  // answer, stop, answer asynchronously, answer streaming, answer with a key
  { route: 'POST /workflows/v1/workflows/{wf}/execute', method: 'POST', path: () => `/workflows/v1/workflows/${wf}/execute`, body: (id) => ({ run_id: id, turn_number: 1, run_input: { inputs: { name: 'Mallory', age: 30, plan: 'pro' } } }), names: 'run' },
  { route: 'POST /workflows/v1/workflows/{wf}/execute', method: 'POST', path: () => `/workflows/v1/workflows/${wf}/execute`, body: (id) => ({ run_id: id, run_input: { command: 'stop' } }), names: 'run' },
  { route: 'POST /workflows/v1/workflows/{wf}/execute', method: 'POST', path: () => `/workflows/v1/workflows/${wf}/execute`, body: (id) => ({ run_id: id, run_input: { query: 'x' } }), headers: { prefer: 'respond-async' }, names: 'run' },
  { route: 'POST /workflows/v1/workflows/{wf}/execute', method: 'POST', path: () => `/workflows/v1/workflows/${wf}/execute`, body: (id) => ({ run_id: id, run_input: { query: 'x' } }), headers: { accept: 'text/event-stream' }, names: 'run' },
  { route: 'POST /workflows/v1/workflows/{wf}/execute', method: 'POST', path: () => `/workflows/v1/workflows/${wf}/execute`, body: (id) => ({ run_id: id, run_input: { query: 'x' } }), headers: { 'idempotency-key': 'same-key-on-their-run' }, names: 'run' },
];

const SESSION_PROBES: Probe[] = [
  { route: 'GET /api/v1/agents/{agent}/sessions/{sid}', method: 'GET', path: (id) => `/api/v1/agents/${wf}/sessions/${id}`, names: 'session' },
  { route: 'DELETE /api/v1/agents/{agent}/sessions', method: 'DELETE', path: () => `/api/v1/agents/${wf}/sessions`, body: (id) => ({ ids: [id] }), names: 'session' },
  { route: 'DELETE /api/v1/agents/{agent}/sessions/{sid}', method: 'DELETE', path: (id) => `/api/v1/agents/${wf}/sessions/${id}`, names: 'session' },
  { route: 'POST /api/v1/agents/{agent}/completions', method: 'POST', path: () => `/api/v1/agents/${wf}/completions`, body: (id) => ({ question: 'x', session_id: id, stream: false }), names: 'session' },
  { route: 'POST /api/v1/agents/{agent}/completions', method: 'POST', path: () => `/api/v1/agents/${wf}/completions`, body: (id) => ({ question: 'x', session_id: id, stream: true }), names: 'session' },
  { route: 'POST /api/v1/agents/chat/completions', method: 'POST', path: () => '/api/v1/agents/chat/completions', body: (id) => ({ agent_id: wf, question: 'x', session_id: id, stream: false }), names: 'session' },
  { route: 'POST /api/v1/agents_openai/{agent}/chat/completions', method: 'POST', path: () => `/api/v1/agents_openai/${wf}/chat/completions`, body: (id) => ({ model: 'm', messages: [{ role: 'user', content: 'x' }], id, stream: false }), names: 'session' },
];

const FILE_PROBES: Probe[] = [
  { route: 'GET /workflows/v1/files/{file}', method: 'GET', path: (id) => `/workflows/v1/files/${id}`, names: 'file' },
  { route: 'DELETE /workflows/v1/files/{file}', method: 'DELETE', path: (id) => `/workflows/v1/files/${id}`, names: 'file' },
];

/**
 * Routes that name no run, session or file of anyone's: each has its own test below (listings,
 * workflows, first turns, uploads), or is the admin's or public.
 */
const NAMES_NOTHING = new Set([
  'GET /workflows/v1/workflows',
  'GET /workflows/v1/workflows/{wf}',
  'GET /workflows/v1/workflows/{wf}/versions',
  'GET /workflows/v1/workflow-runs',
  'POST /workflows/v1/files',
  'GET /api/v1/agents',
  'GET /api/v1/agents/{agent}',
  'POST /api/v1/agents/{agent}/sessions',
  'GET /api/v1/agents/{agent}/sessions',
  'POST /api/v1/agents/{agent}/upload',
  'POST /api/v1/file/upload_info',
  'GET /api/v1/agents/templates',
  'GET /api/v1/agents/tags',
  'GET /api/v1/agents/{agent}/versions',
  'GET /api/v1/agents/{agent}/versions/{n}',
  'GET /api/v1/agents/{agent}/components/{cid}/input-form',
  // a message id leads to no turn (lib/http/ragflow/logs.ts): every answer is the same {}
  'GET /api/v1/agents/{agent}/logs/{mid}',
  'GET /api/v1/chats',
]);

const missingLike = (id: string) => (id.startsWith('file_') ? `file_${hex(32)}` : hex(32));

/** Visitor `v` asks about `id` (another's): the answer must be that for a missing id of its shape. */
async function probe(v: Visitor, p: Probe, id: string): Promise<RawResponse> {
  const auth = p.route.includes('/api/v1/') ? v.ragflow : v.native;
  const headers = { ...v.headers, ...p.headers };
  const missing = missingLike(id);
  const theirs = await send(auth, p.method, p.path(id), p.body?.(id), headers);
  const none = await send(auth, p.method, p.path(missing), p.body?.(missing), headers);
  expect(comparable(theirs, id), `${v.name}: ${p.method} ${p.path(id)} ${JSON.stringify(p.headers ?? {})}`).toEqual(comparable(none, missing));
  for (const other of visitors) {
    if (other === v) continue;
    // nothing of another visitor's comes back but the id asked about
    for (const secret of [other.run, other.file, other.session, other.name]) {
      if (secret && secret !== id) expect(theirs.text).not.toContain(secret);
    }
  }
  return theirs;
}

describe('two visitors of one public key', () => {
  it('every route of the table that names a run, session or file has a probe here', () => {
    const probed = new Set([...RUN_PROBES, ...SESSION_PROBES, ...FILE_PROBES].map((p) => p.route));
    const unclaimed = ROUTES.filter((r) => r.api !== 'public' && !(r.admin && !probed.has(`${r.method} ${r.path}`)))
      .map((r) => `${r.method} ${r.path}`)
      .filter((r) => !probed.has(r) && !NAMES_NOTHING.has(r));
    expect(unclaimed).toEqual([]);
  });

  it('cannot read, answer, stop or follow each other\u2019s runs, on any route that names one', async () => {
    const before = await snapshot();
    const pairs: [number, number][] = [[V1, V2], [V2, V1], [U1, U2], [U2, U1], [V1, U1], [U1, V1]];
    for (const [from, to] of pairs) {
      const v = visitors[from] as Visitor;
      const victim = visitors[to] as Visitor;
      for (const p of RUN_PROBES) {
        const res = await probe(v, p, victim.run);
        // never a success, and the route's own refusal: not found (deleting runs is the admin's)
        expect(res.status, `${v.name} ${p.method} ${p.path(victim.run)}`).toBe(p.method === 'DELETE' ? 403 : 404);
      }
      for (const p of SESSION_PROBES) {
        const res = await probe(v, p, victim.session ?? victim.run);
        // a bare key is refused on RAGFlow's routes; an end user is told the session is not theirs
        if (v.name.startsWith('visitor')) expect(res.json?.code ?? 0, p.route).toBe(109);
        else if (p.method === 'DELETE') expect(res.json.code).toBe(103);
        else expect(res.json.code, `${p.method} ${p.path(victim.run)}`).toBe(102);
      }
    }
    // nothing of anyone's moved
    expect(await snapshot()).toEqual(before);
  });

  it('cannot read or use each other\u2019s files', async () => {
    for (const [from, to] of [[V1, V2], [U1, U2], [U2, V1], [V1, U1]] as [number, number][]) {
      const v = visitors[from] as Visitor;
      const victim = visitors[to] as Visitor;
      for (const p of FILE_PROBES) {
        const res = await probe(v, p, victim.file);
        expect(res.status).toBe(p.method === 'DELETE' ? 403 : 404);
      }
      // naming it in a form answer: an unknown file, exactly as a missing one
      const start = await send(v.native, 'POST', `/workflows/v1/workflows/${fileWf}/execute`, { run_input: {} }, v.name.startsWith('visitor') ? {} : v.headers);
      expect(start.status).toBe(200);
      const headers = v.name.startsWith('visitor') ? { 'easel-run-token': String(start.headers['easel-run-token']) } : v.headers;
      const answer = (doc: string) => send(v.native, 'POST', `/workflows/v1/workflows/${fileWf}/execute`, { run_id: start.json.run_id, turn_number: 1, run_input: { inputs: { doc } } }, headers);
      const theirs = await answer(victim.file);
      const none = await answer(`file_${hex(32)}`);
      expect(theirs.status).toBe(422);
      expect(comparable(theirs, victim.file)).toEqual(comparable(none));
    }
    // their own works: read with what they uploaded it with
    for (const v of visitors) expect((await send(v.native, 'GET', `/workflows/v1/files/${v.file}`, undefined, v.headers)).status).toBe(200);
  });

  it('list only their own runs and sessions, whatever user_id they send', async () => {
    // a bare key (with or without a run token) lists nothing
    for (const v of [visitors[V1], visitors[V2]] as Visitor[]) {
      for (const headers of [{}, v.headers]) {
        const res = await send(v.native, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`, undefined, headers);
        expect(res.status).toBe(403);
        expect(res.json.code).toBe('forbidden');
      }
    }
    // a run planted by a bare key under alice's name is not alice's
    const planted = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'planted', user_id: 'alice' } });
    // one the admin key files under alice is
    const filed = await send(api.adminKey, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'for alice', user_id: 'alice' } });
    const alice = visitors[U1] as Visitor;
    for (const q of ['', '&user_id=bob', '&user_id=visitor-1']) {
      const listed = await send(K, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}${q}`, undefined, alice.headers);
      expect(listed.status).toBe(200);
      const ids = listed.json.items.map((r: { run_id: string }) => r.run_id).sort();
      expect(ids).toEqual([alice.run, alice.session, filed.json.run_id].sort());
      expect(ids).not.toContain(planted.json.run_id);
      const sessions = await send(alice.ragflow, 'GET', `/api/v1/agents/${wf}/sessions?page_size=100${q}`);
      expect(sessions.json.data.map((s: { id: string }) => s.id).sort()).toEqual(ids);
    }
    // the admin key lists everyone's
    const all = (await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}&limit=100`)).json.items.map((r: { run_id: string }) => r.run_id);
    for (const v of visitors) expect(all).toContain(v.run);
  });

  it('resume and read their own runs with what opened them; the admin key reaches all', async () => {
    for (const v of visitors) {
      const t2 = await send(v.native, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_id: v.run, turn_number: 1, run_input: { inputs: { name: v.name, age: 30, plan: 'free' } } }, v.headers);
      expect(t2.status, v.name).toBe(200);
      expect(t2.json.turn_number).toBe(2);
      const turns = await send(v.native, 'GET', `/workflows/v1/workflow-runs/${v.run}/turns`, undefined, v.headers);
      expect(turns.json.items.map((t: { turn_number: number }) => t.turn_number)).toEqual([1, 2]);
      // the record names who acted
      const actor = turns.json.items.map((t: { request: { actor: unknown } }) => t.request.actor);
      if (v.name.startsWith('visitor')) expect(actor).toEqual([{ kind: 'execute_key', id: keyId }, { kind: 'run_token', id: keyId }]);
      else expect(actor).toEqual([{ kind: 'end_user', id: v.name, key_id: keyId }, { kind: 'end_user', id: v.name, key_id: keyId }]);
      expect((await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${v.run}/turns/2`)).status).toBe(200);
      expect((await send(api.adminKey, 'GET', `/workflows/v1/files/${v.file}`)).status).toBe(200);
    }
    const alice = visitors[U1] as Visitor;
    const answered = await send(alice.ragflow, 'POST', `/api/v1/agents/${wf}/completions`, { question: 'hello', session_id: alice.session, stream: false });
    expect(answered.json.code).toBe(0);
  });
});

describe('run tokens', () => {
  it('open only their run; forged, foreign or malformed ones are refused', async () => {
    const v1 = visitors[V1] as Visitor;
    const v2 = visitors[V2] as Visitor;
    // v1's token on v2's run: as missing
    expect((await send(K, 'GET', `/workflows/v1/workflow-runs/${v2.run}`, undefined, v1.headers)).status).toBe(404);
    const [prefix, runId, kid, mac] = (v1.headers['easel-run-token'] as string).split('.');
    const forged = [
      `${prefix}.${v2.run}.${kid}.${mac}`,
      `${prefix}.${runId}.${kid}.${'A'.repeat(mac?.length ?? 43)}`,
      `${prefix}.${runId}.other.${mac}`,
      'rt1.not-a-token',
      `rt2.${runId}.${kid}.${mac}`,
    ];
    for (const t of forged) {
      const res = await send(K, 'GET', `/workflows/v1/workflow-runs/${runId}`, undefined, { 'easel-run-token': t });
      expect(res.status, t).toBe(401);
      expect(res.json).toMatchObject({ code: 'unauthorized', field: 'Easel-Run-Token' });
    }
    // another tenant's key with this token: refused (the token is bound to its tenant)
    const other = await api.addKey(`t${hex(8)}`, 'execute', [wf]);
    expect((await send(other, 'GET', `/workflows/v1/workflow-runs/${runId}`, undefined, v1.headers)).status).toBe(401);
  });

  it('comes again with a replayed first turn, and is never stored', async () => {
    const key = hex(32);
    const first = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'keyed' } }, { 'idempotency-key': key });
    const again = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'keyed' } }, { 'idempotency-key': key });
    expect(again.text).toBe(first.text);
    const runToken = String(first.headers['easel-run-token']);
    expect(again.headers['easel-run-token']).toBe(runToken);
    // streamed and async first turns get one too, in the headers
    const streamed = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 's' } }, { accept: 'text/event-stream' });
    expect(String(streamed.headers['easel-run-token'])).toMatch(/^rt1\./);
    const queued = await send(K, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'q' } }, { prefer: 'respond-async' });
    expect(queued.status).toBe(202);
    expect(String(queued.headers['easel-run-token']).split('.')[1]).toBe(queued.json.run_id);
    await queue.idle();
    const stored = await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${first.json.run_id}/turns/1`);
    expect(stored.text).not.toContain(runToken.split('.')[3]);
    expect(first.text).not.toContain(runToken.split('.')[3]);
    // an admin key needs none, and gets none
    const admin = await send(api.adminKey, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'admin' } });
    expect(admin.headers['easel-run-token']).toBeUndefined();
  });
});

describe('end-user tokens', () => {
  it('are refused when expired, not yet valid, unsigned, signed otherwise or missing claims', async () => {
    const nowSec = Math.floor(Date.now() / 1000);
    const bad: [string, string][] = [
      ['expired', endUserToken(embed, { sub: 'alice', workflows: [wf], exp: nowSec - 1 })],
      ['no exp', endUserToken(embed, { sub: 'alice', workflows: [wf], exp: undefined })],
      ['nbf ahead', endUserToken(embed, { sub: 'alice', workflows: [wf], nbf: nowSec + 600 })],
      ['alg none', endUserToken(embed, { sub: 'alice', workflows: [wf] }, { alg: 'none' })],
      ['HS512', endUserToken(embed, { sub: 'alice', workflows: [wf] }, { alg: 'HS512' })],
      ['another secret', endUserToken(embed, { sub: 'alice', workflows: [wf] }, { secret: `es_${hex(40)}` })],
      ['unknown kid', endUserToken(embed, { sub: 'alice', workflows: [wf] }, { kid: 'emb_0000000000000000' })],
      ['no sub', endUserToken(embed, { workflows: [wf] })],
      ['no workflows', endUserToken(embed, { sub: 'alice' })],
      ['not a JWT', 'eyJhbGciOi.not-a-token'],
    ];
    for (const [why, jwt] of bad) {
      const native = await send(K, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`, undefined, { 'easel-end-user-token': jwt });
      expect(native.status, why).toBe(401);
      expect(native.json.field, why).toBe('Easel-End-User-Token');
      if (!jwt.startsWith('eyJhbGciOi.')) {
        const ragflow = await send(`${K}.${jwt}`, 'GET', `/api/v1/agents/${wf}/sessions`);
        expect(ragflow.json.code, why).toBe(109);
      }
    }
    // a token without kid is tried against the tenant's secrets
    expect((await send(K, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`, undefined, { 'easel-end-user-token': endUserToken(embed, { sub: 'alice', workflows: [wf] }, { kid: null }) })).status).toBe(200);
  });

  it('open only the workflows they name, within the key\u2019s', async () => {
    const only = endUserToken(embed, { sub: 'alice', workflows: [fileWf] });
    expect((await send(K, 'GET', `/workflows/v1/workflows/${wf}`, undefined, { 'easel-end-user-token': only })).status).toBe(404);
    expect((await send(K, 'GET', `/workflows/v1/workflow-runs/${(visitors[U1] as Visitor).run}`, undefined, { 'easel-end-user-token': only })).status).toBe(404);
    expect((await send(`${K}.${only}`, 'GET', '/api/v1/agents')).json.data.canvas.map((a: { id: string }) => a.id)).toEqual([fileWf]);
  });

  it('are what RAGFlow\u2019s routes need with an execute key', async () => {
    for (const [method, path, body] of [['GET', '/api/v1/agents'], ['GET', `/api/v1/agents/${wf}/sessions`], ['POST', `/api/v1/agents/${wf}/completions`, { question: 'x' }], ['POST', `/api/v1/agents_openai/${wf}/chat/completions`, { messages: [{ role: 'user', content: 'x' }] }]] as [string, string, unknown?][]) {
      const res = await send(K, method, path, body);
      expect(res.json, path).toMatchObject({ code: 109, message: expect.stringContaining('end-user token') });
    }
  });

  it('stop working once their embed secret is deleted', async () => {
    const spare = await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey);
    const jwt = endUserToken(spare, { sub: 'carol', workflows: [wf] });
    expect((await send(K, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`, undefined, { 'easel-end-user-token': jwt })).status).toBe(200);
    const listed = (await send(api.adminKey, 'GET', '/workflows/v1/embed-secrets')).json.items.map((s: { id: string }) => s.id);
    expect(listed).toEqual(expect.arrayContaining([embed.id, spare.id]));
    // never shown again
    expect(JSON.stringify(listed)).not.toContain(spare.secret);
    expect((await send(api.adminKey, 'DELETE', `/workflows/v1/embed-secrets/${spare.id}`)).status).toBe(204);
    expect((await send(K, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`, undefined, { 'easel-end-user-token': jwt })).status).toBe(401);
    // the tenant's secrets API neither lists nor resolves embed secrets
    const secrets = (await send(api.adminKey, 'GET', '/workflows/v1/secrets')).json.items;
    expect(JSON.stringify(secrets)).not.toContain('embed');
  });
});

describe('embed secrets', () => {
  it('are at most three a tenant: a fourth is refused until one is deleted', async () => {
    const held = (await send(api.adminKey, 'GET', '/workflows/v1/embed-secrets')).json.items.length;
    const made: EmbedSecret[] = [];
    for (let i = held; i < 3; i++) made.push(await makeEmbedSecret((m, p, o) => api.call(m, p, o), api.adminKey));
    const refused = await send(api.adminKey, 'POST', '/workflows/v1/embed-secrets');
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ code: 'invalid_request', error: expect.stringContaining('at most 3') });
    for (const m of made) expect((await send(api.adminKey, 'DELETE', `/workflows/v1/embed-secrets/${m.id}`)).status).toBe(204);
    expect((await send(api.adminKey, 'DELETE', `/workflows/v1/embed-secrets/${made[0]?.id ?? 'emb_0000000000000000'}`)).status).toBe(404);
  });
});

describe('bare uploads', () => {
  it('answer a file token, good on the first turn that names the file, and that run\u2019s from then on', async () => {
    const file = await upload(K);
    expect(file.status).toBe(201);
    expect(file.json.file_token).toMatch(/^ft1\.file_[0-9a-f]{32}\./);
    // its id alone opens nothing
    expect((await send(K, 'GET', `/workflows/v1/files/${file.json.file_id}`)).status).toBe(404);
    const startRun = async () => {
      const s = await send(K, 'POST', `/workflows/v1/workflows/${fileWf}/execute`, { run_input: {} });
      return { id: s.json.run_id as string, headers: { 'easel-run-token': String(s.headers['easel-run-token']) } };
    };
    const answer = (run: { id: string; headers: Record<string, string> }, doc: string) =>
      send(K, 'POST', `/workflows/v1/workflows/${fileWf}/execute`, { run_id: run.id, turn_number: 1, run_input: { inputs: { doc } } }, run.headers);
    const first = await startRun();
    // by id: refused; by a forged token: refused; by its token: accepted
    expect((await answer(first, file.json.file_id)).status).toBe(422);
    expect((await answer(first, `${file.json.file_token.slice(0, -4)}AAAA`)).status).toBe(422);
    const used = await answer(first, file.json.file_token);
    expect(used.status).toBe(200);
    expect(used.json.outputs.content).toContain('private.txt: mine alone');
    // the run's now: readable with its token; another run cannot take it
    expect((await send(K, 'GET', `/workflows/v1/files/${file.json.file_id}`, undefined, first.headers)).status).toBe(200);
    expect((await answer(await startRun(), file.json.file_token)).status).toBe(422);
  });
});

describe('deleting an end user', () => {
  it('removes that user\u2019s runs and files, and nobody else\u2019s', async () => {
    const dave = { 'easel-end-user-token': token('dave') };
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push((await send(K, 'POST', `/workflows/v1/workflows/${i === 2 ? fileWf : wf}/execute`, { run_input: { query: `dave ${i}` } }, dave)).json.run_id);
    const file = (await upload(K, dave)).json.file_id;
    const res = await send(api.adminKey, 'DELETE', '/workflows/v1/end-users/dave');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ runs_deleted: 3, files_deleted: 1 });
    for (const id of runs) expect((await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${id}`)).status).toBe(404);
    expect((await send(api.adminKey, 'GET', `/workflows/v1/files/${file}`)).status).toBe(404);
    // alice and bob keep theirs
    for (const v of [visitors[U1], visitors[U2]] as Visitor[]) {
      expect((await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${v.run}`)).status).toBe(200);
      expect((await send(api.adminKey, 'GET', `/workflows/v1/files/${v.file}`)).status).toBe(200);
    }
    // it is the admin's
    expect((await send(K, 'DELETE', '/workflows/v1/end-users/alice', undefined, (visitors[U1] as Visitor).headers)).status).toBe(403);
    expect((await send(api.adminKey, 'DELETE', '/workflows/v1/end-users/nobody-at-all')).json).toEqual({ runs_deleted: 0, files_deleted: 0 });
  });
});

describe('webhook deliveries', () => {
  /** The webhook routes of the route table: each is tried below. */
  const WEBHOOK_ROUTES = ['POST /workflows/v1/webhooks/{hook}', 'POST /api/v1/agents/{agent}/webhook'];

  it('are every webhook route of the table', () => {
    expect(ROUTES.filter((r) => /\/webhooks?\b/.test(r.path) && !r.path.endsWith('webhook-secret')).map((r) => `${r.method} ${r.path}`)).toEqual(WEBHOOK_ROUTES);
  });

  it('take no API key for credentials, and start runs that only admin keys reach', async () => {
    const hookToken = `hook-${hex(32)}`;
    const created = await send(api.adminKey, 'POST', '/workflows/v1/workflows', {
      name: 'orders in',
      dsl: graph({
        begin: ['Begin', { mode: 'Webhook', methods: ['POST'], execution_mode: 'Streaming', security: { auth_type: 'token', token: { token_header: 'X-Hook-Token', token_value: hookToken } }, schema: { body: { properties: { order: { type: 'string' } }, required: ['order'] } } }, ['Message:Got']],
        'Message:Got': ['Message', { content: ['got {begin@body.order}'] }],
      }),
    });
    const hookWf = created.json.id as string;
    const hookPath = String(created.json.webhook_url).replace(/^https?:\/\/[^/]+/, '');
    const key = (await send(api.adminKey, 'POST', '/workflows/v1/keys', { name: 'orders page', scope: 'execute', workflow_ids: [hookWf] })).json.key as string;
    // a visitor with a run of their own on the workflow, and an end user it is open to
    const own = await send(key, 'POST', `/workflows/v1/workflows/${hookWf}/execute`, { run_input: {} });
    expect(own.status).toBe(200);
    const runToken = { 'easel-run-token': String(own.headers['easel-run-token']) };
    const carol = endUserToken(embed, { sub: 'carol', workflows: [hookWf] });
    const asCarol = { 'easel-end-user-token': carol };

    const deliver = async (path: string, headers: Record<string, string>) => {
      const res = await client.send({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ order: 'o-1' }) });
      expect(contractViolation('public', res), path).toBeNull();
      return res;
    };
    for (const path of [hookPath, `/api/v1/agents/${hookWf}/webhook`]) {
      // API keys, run tokens and end-user tokens are no webhook credentials
      for (const headers of [{ authorization: `Bearer ${api.adminKey}` }, { authorization: `Bearer ${key}`, ...runToken }, { authorization: `Bearer ${key}.${carol}` }, { authorization: `Bearer ${key}`, ...asCarol }]) {
        const refused = await deliver(path, headers);
        expect(refused.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
      }
    }
    // a delivery sent with carol's token beside the webhook's does not make the run hers
    const started = await deliver(hookPath, { 'x-hook-token': hookToken, authorization: `Bearer ${key}`, ...asCarol });
    expect(started.status).toBe(200);
    const run = started.json.run_id as string;

    for (const [who, auth, headers] of [['visitor', key, runToken], ['carol', key, asCarol]] as [string, string, Record<string, string>][]) {
      const theirs = await send(auth, 'GET', `/workflows/v1/workflow-runs/${run}`, undefined, headers);
      const missing = hex(32);
      const none = await send(auth, 'GET', `/workflows/v1/workflow-runs/${missing}`, undefined, headers);
      expect(theirs.status, who).toBe(404);
      expect(comparable(theirs, run)).toEqual(comparable(none, missing));
      expect((await send(auth, 'GET', `/workflows/v1/workflow-runs/${run}/turns`, undefined, headers)).status).toBe(404);
      expect((await send(auth, 'POST', `/workflows/v1/workflows/${hookWf}/execute`, { run_id: run, run_input: { query: 'x' } }, headers)).status).toBe(404);
    }
    const listed = await send(key, 'GET', `/workflows/v1/workflow-runs?workflow_id=${hookWf}`, undefined, asCarol);
    expect(listed.json.items.map((r: { run_id: string }) => r.run_id)).not.toContain(run);
    const sessions = await send(`${key}.${carol}`, 'GET', `/api/v1/agents/${hookWf}/sessions`);
    expect(sessions.json.data.map((s: { id: string }) => s.id)).not.toContain(run);
    expect((await send(`${key}.${carol}`, 'GET', `/api/v1/agents/${hookWf}/sessions/${run}`)).json.code).toBe(102);

    // the admin key reaches it; its turn names the webhook
    const turns = await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs/${run}/turns`);
    expect(turns.json.items[0].request.actor).toEqual({ kind: 'webhook', id: hookPath.split('/').pop() });
    expect((await send(api.adminKey, 'GET', `/workflows/v1/workflow-runs?workflow_id=${hookWf}`)).json.items.map((r: { run_id: string }) => r.run_id)).toContain(run);
  });
});
