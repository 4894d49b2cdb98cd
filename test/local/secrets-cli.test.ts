import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSecretsCli } from '../../lib/local/secrets-cli';
import { keyIdOf } from '../../lib/secrets/crypto';
import { LocalKeyFile, MasterKeys, parseKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { compileWorkflow } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { listDataKeys } from '../../lib/store/secrets';
import { addVersion, createWorkflow, getVersion } from '../../lib/store/workflows';
import { testTable } from '../helpers/dynamo';
import { newTenant, testStore } from '../helpers/engine';

let dir: string;
let env: Record<string, string>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'easel-secrets-cli-'));
  env = { EASEL_DYNAMODB_ENDPOINT: testTable().endpoint, EASEL_DYNAMODB_TABLE: testTable().tableName, EASEL_MASTER_KEY_FILE: join(dir, 'master-key.json') };
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function cli(argv: string[], extra: Record<string, string> = {}, getParameter?: (name: string) => Promise<string | undefined>) {
  const out: string[] = [];
  const err: string[] = [];
  return runSecretsCli(argv, { ...env, ...extra }, { out: (l) => out.push(l), err: (l) => err.push(l), ...(getParameter ? { getParameter } : {}) }).then((code) => ({ code, out: out.join('\n'), err: err.join('\n') }));
}

describe('npm run secrets', () => {
  it('rotates the local master key, re-wraps the data keys, and rotates a tenant data key', async () => {
    const tenant = newTenant();
    const file = new LocalKeyFile(env.EASEL_MASTER_KEY_FILE as string);
    const secrets = new TenantSecrets({ store: testStore(), master: new MasterKeys(file) });
    await secrets.put(tenant, 'A', 'value-a');
    const before = (await file.load()).current.id;

    const rotated = await cli(['rotate-master', '--accept-previous-days', '2']);
    expect(rotated.code).toBe(0);
    const ring = parseKeyRing(await readFile(file.path, 'utf8'));
    expect(ring.previous.map((k) => k.id)).toEqual([before]);
    expect(rotated.err).toContain(`current key ${ring.current.id}`);

    const rewrap = await cli(['rewrap']);
    expect(rewrap.err).toMatch(/re-wrapped [1-9]\d* data key/);
    expect((await listDataKeys(testStore(), tenant)).map((k) => keyIdOf(k.wrapped))).toEqual([ring.current.id]);

    const dataKey = await cli(['rotate-data-key', tenant]);
    expect([dataKey.code, dataKey.err]).toEqual([0, `tenant ${tenant}: data key version 2, 1 value(s) re-encrypted`]);
    const fresh = new TenantSecrets({ store: testStore(), master: new MasterKeys(new LocalKeyFile(file.path)) });
    expect(await fresh.get(tenant, 'A')).toBe('value-a');
  });

  it('with an SSM parameter prints the rotated ring instead of writing it', async () => {
    const first = await cli(['new-master-ring']);
    const ring = parseKeyRing(first.out);
    const rotated = await cli(['rotate-master'], { EASEL_MASTER_KEY_PARAMETER: '/easel/master' }, async (name) => (name === '/easel/master' ? first.out : undefined));
    expect(rotated.code).toBe(0);
    const next = parseKeyRing(rotated.out);
    expect(next.previous.map((k) => k.id)).toEqual([ring.current.id]);
    expect(next.current.id).not.toBe(ring.current.id);
  });

  it('answers usage errors with exit code 2', async () => {
    expect((await cli(['rotate-data-key'])).code).toBe(2);
    expect((await cli(['nope'])).code).toBe(2);
    expect((await cli([])).code).toBe(2);
  });
});

describe('npm run secrets -- migrate-tool-credentials', () => {
  it('moves the credentials stored versions hold into their tenant’s secrets, rewrites the versions, and changes nothing when run again', async () => {
    const tenant = newTenant();
    const store = testStore();
    const key = `tvly-stored-${tenant}`;
    const agent = (tools: unknown[]) => ({
      components: {
        begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Agent:A'], upstream: [] },
        'Agent:A': { obj: { component_name: 'Agent', params: { llm_id: 'echo', sys_prompt: 'x', prompts: [{ role: 'user', content: '{sys.query}' }], tools } }, downstream: [], upstream: ['begin'] },
      },
      // RAGFlow's editor keeps a copy of the params in the graph
      graph: { nodes: [{ id: 'Agent:A', data: { form: { tools } } }], edges: [] },
    });
    const literal = [{ component_name: 'TavilySearch', name: 'TavilySearch', params: { api_key: key } }];
    // stored as versions were before imports took credentials out (written past the routes)
    await createWorkflow(store, { tenant, id: 'wf_old', name: 'old', dsl: agent(literal) });
    await addVersion(store, tenant, 'wf_old', agent([{ component_name: 'TavilySearch', name: 'TavilySearch', params: { api_key: '' } }]), false);

    const first = await cli(['migrate-tool-credentials', '--tenant', tenant]);
    expect(first.code).toBe(0);
    expect(first.out).toBe(`${tenant} wf_old v1 Agent:A.obj.params.tools.0.params.api_key -> {secret.TAVILY_API_KEY}`);
    expect(first.err).toBe('read 2 version(s), rewrote 2, moved 1 credential(s)');
    const v1 = (await getVersion(store, tenant, 'wf_old', 1)) as any;
    expect(v1.components['Agent:A'].obj.params.tools[0].params.api_key).toBe('{secret.TAVILY_API_KEY}');
    expect(JSON.stringify(v1)).not.toContain(key);
    expect(((await getVersion(store, tenant, 'wf_old', 2)) as any).components['Agent:A'].obj.params.tools[0].params.api_key).toBe('{secret.TAVILY_API_KEY}');
    const secrets = new TenantSecrets({ store, master: new MasterKeys(new LocalKeyFile(env.EASEL_MASTER_KEY_FILE as string)) });
    expect(await secrets.get(tenant, 'TAVILY_API_KEY')).toBe(key);
    expect(() => compileWorkflow(v1, builtinComponents)).not.toThrow();

    const again = await cli(['migrate-tool-credentials', '--tenant', tenant]);
    expect([again.code, again.out, again.err]).toEqual([0, '', 'read 2 version(s), rewrote 0, moved 0 credential(s)']);
  });
});
