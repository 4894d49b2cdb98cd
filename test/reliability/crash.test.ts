/**
 * Crash safety over HTTP: the server process (the built bundle) is killed with SIGKILL at seeded
 * random moments during a conversation; after each kill, the client retries the same request
 * with the same Idempotency-Key until it completes. The stored run must have every turn once,
 * complete, and no model call or Invoke side effect may happen for a turn once it has answered.
 *
 * Every server starts a lease ahead of the one killed before it (its clock runs ahead of the
 * wall clock by a lease per start), so a dead server's claim has always run out for the next
 * one: a retry never waits for a lease, and the outcome does not depend on how fast the
 * machine is. The only wall-clock element is where the kills land, which is the point.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { createWorkflow } from '../../lib/store/workflows';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, testStore } from '../helpers/engine';
import { startTarget, type TargetServer } from '../helpers/target-server';
import { OpenAiServer } from '../llm/openai-server';

const STRESS = Boolean(Number(process.env.EASEL_STRESS));
const TURNS = STRESS ? 500 : 200;
const KILLS = STRESS ? 60 : 20;
const LEASE_MS = 60_000;

let model: OpenAiServer;
let target: TargetServer;
let bundle: string;
/** What happened, in order: the model and Invoke calls of each turn's query, and its answers. */
const log: string[] = [];

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => {
    const query = String(body.messages.at(-1)?.content ?? '');
    log.push(`model ${query}`);
    return { kind: 'text', text: `answer to ${query}`, chunks: 4, delayMs: 8 };
  };
  target = await startTarget((request) => log.push(`invoke ${JSON.parse(request.body).query}`));
  const dir = mkdtempSync(join(tmpdir(), 'easel-crash-'));
  bundle = join(dir, 'server.cjs');
  await build({
    entryPoints: [fileURLToPath(new URL('./crash-server.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    outfile: bundle,
    logLevel: 'error',
  });
});
afterAll(async () => {
  if (bundle) rmSync(dirname(bundle), { recursive: true, force: true });
  await model.close();
  await target.close();
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A seeded generator, so a failing run can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

describe('crash safety over HTTP', () => {
  it(`survives ${KILLS} SIGKILLs during ${TURNS} turns without a lost, doubled or half-written turn`, async () => {
    const tenant = newTenant();
    const key = `crash-key-${tenant}-0123456789`;
    const store = testStore();
    await putApiKey(store, { tenant, id: tenant.slice(1, 17).padEnd(16, '0'), name: 'crash', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(key) });
    const dsl = fixture('llm-stream') as { components: Record<string, { obj: { component_name?: string; params: Record<string, unknown> }; downstream: string[]; upstream: string[] }> };
    // LLM -> Invoke -> Message: a side effect after the model call
    dsl.components['LLM:WiseOwl']!.downstream = ['Invoke:Log'];
    dsl.components['Invoke:Log'] = {
      obj: { component_name: 'Invoke', params: { url: `${target.url}/log`, method: 'post', variables: [{ key: 'query', ref: 'sys.query' }] } },
      downstream: ['Message:Answer'],
      upstream: ['LLM:WiseOwl'],
    };
    dsl.components['Message:Answer']!.upstream = ['Invoke:Log'];
    await createWorkflow(store, { tenant, id: 'crashy', name: 'crashy', dsl });

    const port = await freePort();
    const { endpoint, tableName } = testTable();
    const env = {
      ...process.env,
      PORT: String(port),
      EASEL_DYNAMODB_ENDPOINT: endpoint,
      EASEL_DYNAMODB_TABLE: tableName,
      EASEL_LLM_BASE_URL: model.url,
      EASEL_LLM_DEFAULT_MODEL: 'openai:crash-test',
      EASEL_SSRF_ALLOW: '127.0.0.1',
      EASEL_TURN_LEASE_MS: String(LEASE_MS),
      EASEL_AUTH_CACHE_MS: '0',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    let server: ChildProcess | undefined;
    let starts = 0;
    const start = async () => {
      starts++;
      // a lease ahead of every server before it
      const child = spawn(process.execPath, [bundle, String(starts * (LEASE_MS + 1))], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      await new Promise<void>((resolve, reject) => {
        child.stdout?.on('data', (d: Buffer) => String(d).includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
      });
      server = child;
    };
    const kill = () => {
      server?.kill('SIGKILL');
      server = undefined;
    };

    const random = prng(20261130);
    const killAt = new Set<number>();
    while (killAt.size < KILLS) killAt.add(1 + Math.floor(random() * TURNS));
    await start();
    const started = Date.now();
    let runId: string | undefined;
    let retries = 0;
    try {
      for (let k = 1; k <= TURNS; k++) {
        const body = JSON.stringify({ ...(runId ? { run_id: runId, turn_number: k - 1 } : {}), run_input: { query: `q${k}` } });
        if (killAt.has(k)) setTimeout(kill, Math.floor(random() * 40));
        for (let attempt = 0; ; attempt++) {
          if (!server) await start();
          const res = await fetch(`http://127.0.0.1:${port}/workflows/v1/workflows/crashy/execute`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `turn-${k}` },
            body,
          }).then(async (r) => ({ status: r.status, json: (await r.json()) as { run_id: string; turn_number: number; code?: string } }), () => undefined);
          if (res?.status === 200) {
            expect(res.json.turn_number).toBe(k);
            runId = res.json.run_id;
            log.push(`answered q${k}`);
            break;
          }
          retries++;
          // no answer: the server was killed (the next attempt starts another); a live server
          // answers every attempt, and a dead one's claim has run out for the next server
          if (res !== undefined) throw new Error(`turn ${k}: attempt ${attempt} was answered ${res.status} ${JSON.stringify(res.json)}`);
          if (attempt > 20) throw new Error(`turn ${k} never completed`);
        }
      }
    } finally {
      kill();
    }

    const turns: { turn_number: number; created_at: string; request: { run_input: { query: string } }; response: { turn_number: number; status: string } }[] = [];
    let cursor: string | null = null;
    await start();
    try {
      do {
        const page: { items: typeof turns; next_cursor: string | null } = (await (await fetch(`http://127.0.0.1:${port}/workflows/v1/workflow-runs/${runId}/turns?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${key}` } })).json()) as never;
        turns.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
    } finally {
      kill();
    }

    expect(turns.map((t) => t.turn_number)).toEqual(Array.from({ length: TURNS }, (_, i) => i + 1));
    let repeatedBeforeAnswer = 0;
    for (const t of turns) {
      const k = t.turn_number;
      expect(t.request.run_input.query).toBe(`q${k}`);
      expect(t.response).toMatchObject({ turn_number: k, status: 'completed' });
      const calls = log.filter((e) => e === `model q${k}`);
      const hits = log.filter((e) => e === `invoke q${k}`);
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(hits.length).toBeGreaterThanOrEqual(1);
      // a call may be repeated by a retry of a turn that died uncommitted; once the turn has
      // answered, a retry gets the stored answer and calls nothing
      const answered = log.indexOf(`answered q${k}`);
      expect(log.slice(answered + 1).filter((e) => e === `model q${k}` || e === `invoke q${k}`)).toEqual([]);
      if (calls.length > 1) repeatedBeforeAnswer++;
    }
    console.log(
      `${TURNS} turns, ${KILLS} SIGKILLs, ${starts} server starts, ${retries} retried requests in ${Date.now() - started} ms; ` +
        `${log.filter((e) => e.startsWith('model ')).length} model calls and ${target.requests.length} Invoke calls for ${TURNS} turns ` +
        `(${repeatedBeforeAnswer} turns re-ran a model call after a kill, none once answered)`,
    );
  }, 180_000);
});
