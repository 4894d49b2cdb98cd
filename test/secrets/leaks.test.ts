/**
 * Tenant secrets end to end, wired as `npm start` and Lambda wire them (buildDeps from
 * configuration), against a real HTTP server of the app and a local server that echoes what it
 * is sent: a secret reaches the wire and nothing else — not an item of the tenant (decoded with
 * the store's codec, blobs included), not a log line, not a response — before and after a
 * master key rotation. And a tenant resolves its own secrets only, and the operator's only as
 * allow-listed: the exfiltration of an operator secret through an Invoke header is refused.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { DeleteTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readConfig } from '../../lib/config';
import { createApp, type AppDeps } from '../../lib/http/app';
import { buildDeps } from '../../lib/http/deps';
import { withTelemetry } from '../../lib/http/observability';
import { createTelemetry } from '../../lib/runtime/telemetry';
import { LocalKeyFile } from '../../lib/secrets/master-key';
import { keyIdOf } from '../../lib/secrets/crypto';
import { decompress } from '../../lib/store/codec';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { listDataKeys } from '../../lib/store/secrets';
import { createDynamoClients, ensureTable } from '../../lib/store/setup';
import { graph } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { newTenant } from '../helpers/engine';
import { sseFrames } from '../helpers/http';

const hex = (n: number) => randomBytes(n).toString('hex');
const A = newTenant();
const B = newTenant();
// characters that URL-encoding and JSON change, so every form differs from the raw one
const SECRET = `tok/${hex(8)}+a=b&c?d "q" ${hex(8)}`;
const OPS_ROOT = `ops-root-${hex(12)}`;
const SHARED = `shared-${hex(12)}`;
const B_SECRET = `b-own-${hex(12)}`;

/** What must appear nowhere: the value, its base64 (both alphabets) and URL-encoded forms. */
function formsOf(value: string): string[] {
  const bytes = Buffer.from(value);
  return [value, bytes.toString('base64'), bytes.toString('base64').replace(/=+$/, ''), bytes.toString('base64url'), encodeURIComponent(value), new URLSearchParams({ v: value }).toString().slice(2)];
}

let dir: string;
let keyFile: LocalKeyFile;
let deps: AppDeps;
let api: ServerType;
let base: string;
let echo: Server;
let echoUrl: string;
const seen: { tenant: string | undefined; headers: IncomingHttpHeaders }[] = [];
const logLines: string[] = [];
const responses: string[] = [];
const keyOf: Record<string, string> = {};
const restore: (() => void)[] = [];

async function call(tenant: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${keyOf[tenant]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  responses.push(`${res.status} ${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n${text}`);
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

/** A workflow whose Invoke sends `header` (a template) to the echo server and shows the result. */
async function workflowWith(tenant: string, header: string): Promise<string> {
  const dsl = graph({
    begin: ['Begin', {}, ['Invoke:Echo']],
    'Invoke:Echo': ['Invoke', { url: `${echoUrl}/echo?tenant=${tenant}`, method: 'post', headers: JSON.stringify({ 'x-api-key': header, authorization: `Basic {secret.${header.match(/secret\.(\w+)/)?.[1] ?? 'NONE'}}` }), variables: [] }, ['Message:Show']],
    'Message:Show': ['Message', { content: ['echoed: {Invoke:Echo@result}'] }],
  });
  const made = await call(tenant, 'POST', '/workflows/v1/workflows', { name: `echo ${hex(3)}`, dsl });
  expect(made.status).toBe(201);
  return made.json.id as string;
}

function messageOf(body: { events: { event: string; data: { content?: string } }[] }): string {
  return body.events.filter((e) => e.event === 'message').map((e) => e.data.content ?? '').join('');
}

/** Every item of a tenant, binary attributes decompressed with the store's codec, chunked blobs joined. */
async function decodedItemsOf(tenant: string): Promise<string[]> {
  const { doc, tableName } = own;
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({
      TableName: tableName,
      FilterExpression: 'pk = :t OR begins_with(pk, :p)',
      ExpressionAttributeValues: { ':t': `T#${tenant}`, ':p': `T#${tenant}#` },
      ExclusiveStartKey: start,
      ConsistentRead: true,
    }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  expect(items.length).toBeGreaterThan(5);
  const chunks = new Map<string, Buffer[]>();
  const out: string[] = [];
  for (const item of items) {
    const fields: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(item)) {
      if (!(value instanceof Uint8Array)) {
        fields[name] = value;
        continue;
      }
      const chunk = /^(B#[0-9a-f]+)#(\d{4})$/.exec(String(item.sk));
      if (chunk?.[1]) chunks.set(`${item.pk}/${chunk[1]}`, [...(chunks.get(`${item.pk}/${chunk[1]}`) ?? []), Buffer.from(value)]);
      fields[name] = readable(value);
    }
    out.push(JSON.stringify(fields));
  }
  for (const parts of chunks.values()) out.push(readable(Buffer.concat(parts)));
  return out;
}

function readable(bytes: Uint8Array): string {
  try {
    return decompress(bytes);
  } catch {
    return Buffer.from(bytes).toString('latin1');
  }
}

function expectNowhere(values: string[], texts: string[], where: string): void {
  for (const value of values) {
    for (const form of formsOf(value)) {
      const hit = texts.find((t) => t.includes(form));
      expect(hit === undefined ? null : `${where} holds a form of a secret: ${hit.slice(0, 300)}`).toBeNull();
    }
  }
}

/**
 * A table of this file's own: the checks scan every item of a tenant, and a scan of the shared
 * test table would read every other suite's items too (slow, and slower the more suites ran).
 */
let own: { doc: DynamoDBDocumentClient; client: DynamoDBClient; tableName: string; endpoint: string };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'easel-secrets-'));
  const { endpoint } = testTable();
  const clients = createDynamoClients({ endpoint });
  own = { ...clients, tableName: `easel-secrets-${randomBytes(4).toString('hex')}`, endpoint };
  await ensureTable(own.client, own.tableName);
  const { tableName } = own;
  const config = readConfig({
    EASEL_DYNAMODB_ENDPOINT: endpoint,
    EASEL_DYNAMODB_TABLE: tableName,
    EASEL_SSRF_ALLOW: '127.0.0.1',
    EASEL_MASTER_KEY_FILE: join(dir, '.easel', 'master-key.json'),
    EASEL_SECRET_OPS_ROOT: OPS_ROOT,
    EASEL_SECRET_SHARED: SHARED,
    EASEL_OPERATOR_SECRETS_FOR_TENANTS: JSON.stringify({ [A]: ['SHARED'] }),
  });
  const logger = {
    info: (message: string, fields?: Record<string, unknown>) => logLines.push(JSON.stringify({ level: 'info', message, ...fields })),
    error: (message: string, fields?: Record<string, unknown>) => logLines.push(JSON.stringify({ level: 'error', message, ...fields })),
  };
  deps = { ...buildDeps(config, { logger }), logger };
  keyFile = new LocalKeyFile(join(dir, '.easel', 'master-key.json'));
  // whatever else the process prints is captured too
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream);
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      logLines.push(String(chunk));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof stream.write;
    restore.push(() => (stream.write = write));
  }
  const app = withTelemetry(createApp(deps), { ...createTelemetry(), logger });
  api = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  echo = createServer((req, res) => {
    const tenant = new URL(req.url ?? '/', 'http://x').searchParams.get('tenant') ?? undefined;
    seen.push({ tenant, headers: req.headers });
    const h = String(req.headers['x-api-key'] ?? '');
    // the header back, as it came and in the forms a careless server might use
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
      headers: req.headers,
      base64: Buffer.from(h).toString('base64'),
      url: encodeURIComponent(h),
    }));
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  for (const tenant of [A, B]) {
    keyOf[tenant] = `test-admin-${hex(16)}`;
    await putApiKey(deps.engine.store, { tenant, id: hex(8), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(keyOf[tenant] as string) });
  }
});

afterAll(async () => {
  for (const r of restore) r();
  api?.close();
  echo?.closeAllConnections();
  await new Promise<void>((resolve) => (echo ? echo.close(() => resolve()) : resolve()));
  await rm(dir, { recursive: true, force: true });
  await own?.client.send(new DeleteTableCommand({ TableName: own.tableName }));
});

describe('a tenant secret in an Invoke header', () => {
  it('reaches the wire only, before and after a master key rotation; no item, log line or response holds it', async () => {
    expect((await call(A, 'PUT', '/workflows/v1/secrets/CRM_TOKEN', { value: SECRET })).status).toBe(201);
    const wf = await workflowWith(A, 'Bearer {secret.CRM_TOKEN}');

    const first = await call(A, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'go' } });
    expect(first.json.status).toBe('completed');
    expect(seen.at(-1)?.headers['x-api-key']).toBe(`Bearer ${SECRET}`);
    expect(seen.at(-1)?.headers.authorization).toBe(`Basic ${SECRET}`);
    // the echo came back, with the secret in every form redacted
    expect(messageOf(first.json)).toContain('"x-api-key":"Bearer [redacted]"');
    expect(messageOf(first.json)).toMatch(/"base64":"[^"]*\[redacted\]/);

    const before = (await listDataKeys(deps.engine.store, A)).map((k) => keyIdOf(k.wrapped));
    const ring = await keyFile.rotate(7 * 86_400_000);
    expect(before).not.toContain(ring.current.id);
    // the server's own key file object caches the ring for a minute: re-wrap through a fresh view
    const { TenantSecrets, MasterKeys } = await import('../../lib/secrets');
    const rotated = new TenantSecrets({ store: deps.engine.store, master: new MasterKeys(new LocalKeyFile(keyFile.path)) });
    expect(await rotated.rewrapTenant(A)).toEqual({ rewrapped: 1, unreadable: 0 });
    expect((await listDataKeys(deps.engine.store, A)).map((k) => keyIdOf(k.wrapped))).toEqual([ring.current.id]);
    // a server started now (a fresh process) reads the re-wrapped key with the new ring
    const fresh = buildDeps(readConfig({ EASEL_DYNAMODB_ENDPOINT: own.endpoint, EASEL_DYNAMODB_TABLE: own.tableName, EASEL_MASTER_KEY_FILE: keyFile.path }));
    expect(await fresh.secrets?.get(A, 'CRM_TOKEN')).toBe(SECRET);

    // used again: a second turn of a new run, streamed
    const second = await call(A, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'again' } }, { accept: 'text/event-stream' });
    const frames = sseFrames(second.text);
    expect(frames.at(-1)?.event).toBe('turn_response');
    expect(frames.at(-1)?.data.status).toBe('completed');
    expect(seen.at(-1)?.headers['x-api-key']).toBe(`Bearer ${SECRET}`);
    // what the client reads back later
    const runs = await call(A, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`);
    for (const run of runs.json.items as { run_id: string }[]) {
      await call(A, 'GET', `/workflows/v1/workflow-runs/${run.run_id}`);
      await call(A, 'GET', `/workflows/v1/workflow-runs/${run.run_id}/turns`);
      await call(A, 'GET', `/workflows/v1/workflow-runs/${run.run_id}/turns/1?format=sse`);
    }
    await call(A, 'GET', '/workflows/v1/secrets');

    expectNowhere([SECRET], await decodedItemsOf(A), 'an item of the tenant');
    expect(logLines.length).toBeGreaterThan(5);
    expectNowhere([SECRET], logLines, 'a log line');
    expectNowhere([SECRET], responses, 'a response');
  });
});

describe('whose secrets a run resolves', () => {
  it('tenant B cannot use tenant A’s secret names: the run fails on an unknown secret, nothing is sent', async () => {
    await call(A, 'PUT', '/workflows/v1/secrets/ONLY_A', { value: `only-a-${hex(8)}` });
    const wf = await workflowWith(B, '{secret.ONLY_A}');
    const sent = seen.length;
    const res = await call(B, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'go' } });
    expect(res.json.status).toBe('failed');
    expect(res.json.error).toMatchObject({ message: expect.stringContaining('unknown secret "ONLY_A"') });
    expect(seen.length).toBe(sent);
    // its own secret of the same name is its own
    await call(B, 'PUT', '/workflows/v1/secrets/ONLY_A', { value: B_SECRET });
    expect((await call(B, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'go' } })).json.status).toBe('completed');
    expect(seen.at(-1)).toMatchObject({ tenant: B, headers: { 'x-api-key': B_SECRET } });
  });

  it('regression: an operator secret in an Invoke header to a tenant’s URL does not resolve (exfiltration refused)', async () => {
    for (const tenant of [A, B]) {
      const wf = await workflowWith(tenant, '{secret.OPS_ROOT}');
      const sent = seen.length;
      const res = await call(tenant, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'go' } });
      expect(res.json.status).toBe('failed');
      expect(res.json.error.message).toContain('unknown secret "OPS_ROOT"');
      expect(seen.length).toBe(sent);
    }
    expect(seen.some((s) => JSON.stringify(s.headers).includes(OPS_ROOT))).toBe(false);
  });

  it('an operator secret reaches only the tenants it is allow-listed for', async () => {
    const forA = await workflowWith(A, '{secret.SHARED}');
    expect((await call(A, 'POST', `/workflows/v1/workflows/${forA}/execute`, { run_input: { query: 'go' } })).json.status).toBe('completed');
    expect(seen.at(-1)).toMatchObject({ tenant: A, headers: { 'x-api-key': SHARED } });
    const forB = await workflowWith(B, '{secret.SHARED}');
    const sent = seen.length;
    const res = await call(B, 'POST', `/workflows/v1/workflows/${forB}/execute`, { run_input: { query: 'go' } });
    expect(res.json.status).toBe('failed');
    expect(seen.length).toBe(sent);
    expectNowhere([OPS_ROOT, SHARED, B_SECRET], [...logLines, ...responses, ...(await decodedItemsOf(A)), ...(await decodedItemsOf(B))], 'the test');
  });

  it('a user’s query that spells a secret reference does not resolve it', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Invoke:Echo']],
      'Invoke:Echo': ['Invoke', { url: `${echoUrl}/echo?tenant=${A}`, method: 'get', headers: JSON.stringify({ 'x-api-key': '{sys.query}' }) }, ['Message:Show']],
      'Message:Show': ['Message', { content: ['{Invoke:Echo@result}'] }],
    });
    const wf = (await call(A, 'POST', '/workflows/v1/workflows', { name: 'query header', dsl })).json.id;
    await call(A, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: '{secret.CRM_TOKEN}' } });
    expect(seen.at(-1)?.headers['x-api-key']).toBe('{secret.CRM_TOKEN}');
  });
});
