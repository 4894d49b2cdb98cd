import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TransientError } from '../../lib/canvas';
import { htmlToText } from '../../lib/components/invoke';
import { canvasFor, fixture, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let server: Server;
let base: string;
const seen: Seen[] = [];
/** What the next requests get: status and body, in order; then 200 with a forecast. */
const script: { status: number; body: string; headers?: Record<string, string> }[] = [];

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const next = script.shift() ?? { status: 200, body: JSON.stringify({ summary: 'mild, 12°C' }), headers: { 'content-type': 'application/json' } };
    res.writeHead(next.status, next.headers ?? {}).end(next.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
beforeEach(() => {
  seen.length = 0;
  script.length = 0;
});

const allowLoopback = { allow: ['127.0.0.1'], secrets: { WEATHER_KEY: 'wk-secret-123' } };

describe('Invoke against a local server', () => {
  it('posts the variables as JSON with rendered headers and a secret, and exposes the result', async () => {
    const canvas = canvasFor(fixture('invoke'), { services: testServices(allowLoopback) });
    const events = await turn(canvas, { inputs: { endpoint: base, city: 'Lyon' } });
    expect(messages(events)).toEqual(['Lyon: mild, 12°C (HTTP 200)']);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/forecast', body: JSON.stringify({ city: 'Lyon', days: 3 }) });
    expect(seen[0]?.headers).toMatchObject({ 'x-api-key': 'wk-secret-123', 'x-city': 'Lyon', 'content-type': 'application/json' });
    // the secret is used on the wire only
    expect(JSON.stringify(events)).not.toContain('wk-secret-123');
    expect(JSON.stringify(canvas.serialize())).not.toContain('wk-secret-123');
  });

  it('sends a GET’s variables as the query string and can clean HTML', async () => {
    script.push({ status: 200, body: '<html><script>x()</script><p>Hello &amp; welcome</p><p>bye</p></html>' });
    const dsl = graph({
      begin: ['Begin', {}, ['Invoke:Get']],
      'Invoke:Get': ['Invoke', { url: `${base}/page`, method: 'get', clean_html: true, variables: [{ key: 'q', ref: 'sys.query' }, { key: 'n', value: 2 }] }, ['Message:M']],
      'Message:M': ['Message', { content: ['{Invoke:Get@result}'] }],
    });
    const events = await turn(canvasFor(dsl, { services: testServices(allowLoopback) }), { query: 'a b&c' });
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/page?q=a+b%26c&n=2', body: '' });
    expect(messages(events)).toEqual(['Hello & welcome\nbye']);
  });

  it('retries an idempotent request on 503, and fails the turn as transient when it keeps failing', async () => {
    script.push({ status: 503, body: 'busy' }, { status: 200, body: 'ok' });
    const dsl = (method: string) => graph({
      begin: ['Begin', {}, ['Invoke:Call']],
      'Invoke:Call': ['Invoke', { url: `${base}/x`, method, max_retries: 2, delay_after_error: 0 }, ['Message:M']],
      'Message:M': ['Message', { content: ['{Invoke:Call@result}'] }],
    });
    expect(messages(await turn(canvasFor(dsl('put'), { services: testServices(allowLoopback) }), {}))).toEqual(['ok']);
    expect(seen).toHaveLength(2);

    seen.length = 0;
    script.push({ status: 503, body: 'busy' }, { status: 200, body: 'ok' });
    // POST is not idempotent: no retry unless configured
    await expect(turn(canvasFor(dsl('post'), { services: testServices(allowLoopback) }), {})).rejects.toBeInstanceOf(TransientError);
    expect(seen).toHaveLength(1);
  });

  it('returns 4xx answers as the result, as RAGFlow does', async () => {
    script.push({ status: 404, body: 'no such city' });
    const canvas = canvasFor(fixture('invoke'), { services: testServices(allowLoopback) });
    const events = await turn(canvas, { inputs: { endpoint: base, city: 'Atlantis' } });
    expect(last(events).event).toBe('workflow_finished');
    expect(messages(events)).toEqual(['Atlantis:  (HTTP 404)']);
  });
});

describe('Invoke refuses what the SSRF guard refuses', () => {
  const refused = async (endpoint: string, services = testServices({ secrets: { WEATHER_KEY: 'k' } })) => {
    const canvas = canvasFor(fixture('invoke'), { services });
    const events = await turn(canvas, { inputs: { endpoint, city: 'x' } });
    const end = last(events);
    expect(end.event).toBe('workflow_failed');
    return end.event === 'workflow_failed' ? end.data.error : undefined;
  };

  it.each([
    ['loopback', 'http://127.0.0.1:9'],
    ['loopback, decimal', 'http://2130706433'],
    ['loopback, octal', 'http://0177.0.0.1'],
    ['loopback, IPv6', 'http://[::1]'],
    ['metadata', 'http://169.254.169.254/latest/meta-data'],
    ['metadata, IPv6', 'http://[fd00:ec2::254]'],
    ['private', 'http://10.0.0.8'],
    ['private', 'http://192.168.1.1'],
    ['private', 'http://172.20.0.1'],
    ['IPv4-mapped IPv6', 'http://[::ffff:169.254.169.254]'],
    ['unique local', 'http://[fc00::1]'],
    ['link-local IPv6', 'http://[fe80::1]'],
    ['unspecified', 'http://0.0.0.0'],
  ])('%s: %s', async (_label, endpoint) => {
    const error = await refused(endpoint);
    expect(error?.component_id).toBe('Invoke:Forecast');
    expect(error?.message).toMatch(/refused|not allowed|blocked/i);
    expect(seen).toHaveLength(0);
  });

  it('refuses a DNS name that resolves to a refused address', async () => {
    expect(await refused('http://localhost:1')).toBeDefined();
    const resolve = async () => [{ address: '10.1.2.3', family: 4 as const }];
    const error = await refused('http://internal.example', testServices({ resolve, secrets: { WEATHER_KEY: 'k' } }));
    expect(error?.message).toMatch(/private/);
  });

  it('refuses a redirect from an allowed host into a refused one', async () => {
    script.push({ status: 302, body: '', headers: { location: 'http://169.254.169.254/latest/meta-data/' } });
    const error = await refused(base, testServices(allowLoopback));
    expect(error?.message).toMatch(/link-local/);
    expect(seen).toHaveLength(1); // the allowed hop only
  });
});

describe('htmlToText', () => {
  it('keeps the text and line breaks of paragraphs', () => {
    expect(htmlToText('<h1>Title</h1><style>p{}</style><p>a&nbsp;b</p><br/>c')).toBe('Title\na b\nc');
  });
});
