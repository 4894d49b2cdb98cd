/**
 * What an import does to the tools of a DSL, through both dialects' create routes: a credential
 * written into a tool's params is moved into the tenant's secrets and replaced by its reference
 * (no stored item holds it), an empty or placeholder one becomes a reference with a warning
 * when the secret is unset, a refused import writes no secret, and tool kinds Easel does not
 * offer are refused with their reasons — or left out with `drop_unsupported_tools`, reported.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileWorkflow } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { getVersion } from '../../lib/store/workflows';
import { graph } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

const CORPUS = resolve(process.env.EASEL_RAGFLOW_CORPUS ?? resolve(__dirname, '../../../shared/ragflow'));
const template = (name: string) => JSON.parse(readFileSync(resolve(CORPUS, `agent/templates/${name}.json`), 'utf8'));

let api: Served;
let secrets: TenantSecrets;
beforeAll(async () => {
  const engine = testEngine();
  secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  api = await serveApp(engine, { secrets });
});
afterAll(async () => {
  await api?.close();
});

/** A tenant of its own, with an admin key, so secrets of one test do not meet another's. */
async function tenant() {
  const id = `t${randomBytes(6).toString('hex')}`;
  const key = await api.addKey(id, 'admin');
  return { id, key };
}

/** An Agent whose tools are `tools`, between Begin and a Message. */
function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Researcher']],
    'Agent:Researcher': ['Agent', { llm_id: 'echo', sys_prompt: 'You research.', prompts: [{ role: 'user', content: '{sys.query}' }], tools }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Researcher@content}'] }],
  });
}

const tavily = (api_key: unknown) => ({ component_name: 'TavilySearch', name: 'TavilySearch', params: { api_key } });

/** Every item of the tenant in the table, as stored (binary attributes as base64 too). */
async function storedItems(tenantId: string): Promise<string> {
  const { doc, tableName } = testTable();
  const items: unknown[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({ TableName: tableName, FilterExpression: 'contains(pk, :t)', ExpressionAttributeValues: { ':t': tenantId }, ExclusiveStartKey: start, ConsistentRead: true }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return JSON.stringify(items, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('latin1') + Buffer.from(v).toString('base64') : v));
}

describe('a credential in a tool’s params', () => {
  it('is moved into the tenant’s secrets at import and replaced by its reference; no stored item holds it', async () => {
    const t = await tenant();
    const key = `tvly-${randomBytes(12).toString('hex')}`;
    const dsl = agentDsl([tavily(key)]);
    const created = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { name: 'research', dsl } });
    expect(created.status).toBe(201);
    expect(created.json.warnings).toEqual([
      expect.objectContaining({ code: 'credential_moved', component_id: 'Agent:Researcher', field: 'obj.params.tools.0.params.api_key', kind: 'TavilySearch', secret: 'TAVILY_API_KEY' }),
    ]);
    expect(created.text).not.toContain(key);
    expect(await secrets.get(t.id, 'TAVILY_API_KEY')).toBe(key);
    const stored = (await getVersion(api.engine.store, t.id, created.json.id, 1)) as any;
    expect(stored.components['Agent:Researcher'].obj.params.tools[0].params.api_key).toBe('{secret.TAVILY_API_KEY}');
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(await storedItems(t.id)).not.toContain(key);
  });

  it('another value for the same kind goes under a numbered name; the same value reuses its secret', async () => {
    const t = await tenant();
    await secrets.put(t.id, 'TAVILY_API_KEY', 'tvly-already-there-0001');
    const other = `tvly-${randomBytes(12).toString('hex')}`;
    const first = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { name: 'a', dsl: agentDsl([tavily(other)]) } });
    expect(first.json.warnings).toEqual([expect.objectContaining({ code: 'credential_moved', secret: 'TAVILY_API_KEY_2' })]);
    expect(await secrets.get(t.id, 'TAVILY_API_KEY')).toBe('tvly-already-there-0001');
    expect(await secrets.get(t.id, 'TAVILY_API_KEY_2')).toBe(other);
    const again = await api.call('POST', `/workflows/v1/workflows/${first.json.id}/versions`, { key: t.key, body: { dsl: agentDsl([tavily(other), tavily('tvly-already-there-0001')]) } });
    expect(again.status).toBe(201);
    expect(again.json.warnings.map((w: any) => w.secret)).toEqual(['TAVILY_API_KEY_2', 'TAVILY_API_KEY']);
    expect((await secrets.list(t.id)).map((s) => s.name).sort()).toEqual(['TAVILY_API_KEY', 'TAVILY_API_KEY_2']);
  });

  it('empty or a placeholder, becomes a reference to the kind’s secret, with a warning while that secret is unset', async () => {
    const t = await tenant();
    const dsl = agentDsl([tavily(''), tavily('YOUR_API_KEY (obtained from https://tavily.com)')]);
    const created = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { name: 'r', dsl } });
    expect(created.status).toBe(201);
    expect(created.json.warnings).toEqual([
      expect.objectContaining({ code: 'credential_unset', field: 'obj.params.tools.0.params.api_key', secret: 'TAVILY_API_KEY', message: expect.stringContaining('was empty, now names the tenant secret TAVILY_API_KEY, which is not set') }),
      expect.objectContaining({ code: 'credential_unset', field: 'obj.params.tools.1.params.api_key', secret: 'TAVILY_API_KEY', message: expect.stringContaining('held a placeholder') }),
    ]);
    const stored = (await getVersion(api.engine.store, t.id, created.json.id, 1)) as any;
    expect(stored.components['Agent:Researcher'].obj.params.tools.map((x: any) => x.params.api_key)).toEqual(['{secret.TAVILY_API_KEY}', '{secret.TAVILY_API_KEY}']);
    await secrets.put(t.id, 'TAVILY_API_KEY', 'tvly-set-now-0002');
    const later = await api.call('POST', `/workflows/v1/workflows/${created.json.id}/versions`, { key: t.key, body: { dsl } });
    expect(later.json.warnings).toEqual([]);
  });

  it('in a DSL that is refused for another reason, writes no secret', async () => {
    const t = await tenant();
    const key = `tvly-${randomBytes(12).toString('hex')}`;
    const dsl = agentDsl([tavily(key), { component_name: 'TavilySearch', name: 'bad', params: { max_results: 99 } }]);
    const refused = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { name: 'r', dsl } });
    expect(refused.status).toBe(400);
    expect(refused.text).not.toContain(key);
    expect(await secrets.list(t.id)).toEqual([]);
    const ragflow = await api.call('POST', '/api/v1/agents', { key: t.key, body: { title: 'r', dsl } });
    expect(ragflow.json.code).not.toBe(0);
    expect(await secrets.list(t.id)).toEqual([]);
  });

  it('through RAGFlow’s POST /api/v1/agents, is moved the same way and reported in message', async () => {
    const t = await tenant();
    const key = `tvly-${randomBytes(12).toString('hex')}`;
    const created = await api.call('POST', '/api/v1/agents', { key: t.key, body: { title: 'rf', dsl: agentDsl([tavily(key)]) } });
    expect(created.json.code).toBe(0);
    expect(created.json.message).toMatch(/moved into the tenant secret TAVILY_API_KEY/);
    expect(created.text).not.toContain(key);
    expect(await secrets.get(t.id, 'TAVILY_API_KEY')).toBe(key);
    expect(await storedItems(t.id)).not.toContain(key);
  });
});

describe.runIf(existsSync(CORPUS))('tool kinds Easel does not offer', () => {
  it('leave 4 of RAGFlow’s 15 stock agent templates refused; the other 11 import unchanged', () => {
    const dir = resolve(CORPUS, 'agent/templates');
    const agents = readdirSync(dir)
      .map((file) => ({ name: file.replace(/\.json$/, ''), template: JSON.parse(readFileSync(resolve(dir, file), 'utf8')) }))
      // the ingestion pipelines are not agents, and compiler.json is no canvas
      .filter(({ template }) => template.dsl && template.canvas_type !== 'Ingestion Pipeline');
    expect(agents).toHaveLength(15);
    const refused = agents.filter(({ template }) => {
      try {
        compileWorkflow(template.dsl, builtinComponents);
        return false;
      } catch {
        return true;
      }
    });
    expect(refused.map((a) => a.name).sort()).toEqual(['data_analysis_beginner_assistant', 'stock_market_research_assistant', 'text2sql_data_expert', 'web_search_assistant']);
  });

  it('web_search_assistant is refused naming Bing and DuckDuckGo with their reasons', async () => {
    const t = await tenant();
    const refused = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: template('web_search_assistant') });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('unsupported tool kinds: Bing, DuckDuckGo');
    expect(refused.text).toContain('Bing: RAGFlow has no implementation of it, and the Bing Search APIs are retired');
    expect(refused.text).toContain('DuckDuckGo: DuckDuckGo offers no public web-search API to call');
  });

  it('web_search_assistant imports with drop_unsupported_tools, dropping Bing and DuckDuckGo only, reported (both dialects)', async () => {
    const t = await tenant();
    const created = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { ...template('web_search_assistant'), drop_unsupported_tools: true } });
    expect(created.status).toBe(201);
    const dropped = created.json.warnings.filter((w: any) => w.code === 'tool_dropped');
    expect(dropped.map((w: any) => w.kind)).toEqual(['Bing', 'DuckDuckGo']);
    const stored = (await getVersion(api.engine.store, t.id, created.json.id, 1)) as any;
    const kinds = Object.values(stored.components as Record<string, any>).flatMap((c) => (c.obj.params.tools ?? []).map((x: any) => x.component_name));
    expect(kinds).not.toContain('Bing');
    expect(kinds).not.toContain('DuckDuckGo');
    expect(JSON.stringify(stored.graph)).not.toContain('"component_name":"Bing"');

    const ragflow = await api.call('POST', '/api/v1/agents?drop_unsupported_tools=true', { key: t.key, body: { ...template('web_search_assistant'), title: 'web search (rf)' } });
    expect(ragflow.json.code).toBe(0);
    expect(ragflow.json.message).toMatch(/the tool Bing .* was left out/);
    expect(ragflow.json.message).toMatch(/the tool DuckDuckGo .* was left out/);
  });

  it('a refused kind on the canvas is refused with its reason', async () => {
    const t = await tenant();
    const dsl = graph({ begin: ['Begin', {}, ['CodeExec:Run']], 'CodeExec:Run': ['CodeExec', {}] });
    const refused = await api.call('POST', '/workflows/v1/workflows', { key: t.key, body: { name: 'c', dsl } });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('unsupported component \\"CodeExec\\": it runs code or SQL the tenant supplies');
  });
});
