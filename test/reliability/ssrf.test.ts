/**
 * SSRF through the API: a tenant's workflow whose Invoke URL comes from the user's message is
 * refused for every address class the guard refuses, over IPv4 and IPv6, in every spelling.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

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
beforeAll(async () => {
  api = await serveApp(testEngine());
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
