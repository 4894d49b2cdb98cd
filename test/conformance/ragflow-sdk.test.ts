/**
 * RAGFlow's own Python SDK against Easel: a real server on 127.0.0.1 (the app `npm start`
 * serves, over DynamoDB Local), and ragflow-sdk-driver.py making every SDK call Easel supports —
 * agents, sessions, ask with and without streaming (also while a form waits), deletes — then importing every stock
 * template of the corpus. The driver reports; this file asserts.
 *
 * The corpus (RAGFlow's SDK and templates) is found at EASEL_RAGFLOW_CORPUS, by default
 * ../shared/ragflow from the repository root. Without it the suite is skipped and says why;
 * with it, python3 and its `requests` module are required (Debian: python3 python3-requests),
 * and their absence fails the suite. The SDK imports `beartype`; a no-op stand-in is made in a
 * temporary folder for it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine } from '../helpers/engine';
import { BROKEN_PDF, FAQ_TXT, GUIDE_MD } from '../helpers/knowledge-docs';
import { type Served, serveApp } from '../helpers/http';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CORPUS = resolve(REPO, process.env.EASEL_RAGFLOW_CORPUS ?? '../shared/ragflow');
const SDK = join(CORPUS, 'sdk', 'python');
const DRIVER = fileURLToPath(new URL('./ragflow-sdk-driver.py', import.meta.url));
const present = existsSync(join(SDK, 'ragflow_sdk'));
if (!present) console.warn(`RAGFlow SDK conformance suite skipped: no RAGFlow corpus at ${CORPUS} (set EASEL_RAGFLOW_CORPUS to its folder)`);

/** Stock templates that import today; the count may grow, never shrink. */
const IMPORTED_TODAY = [
  'customer_feedback_dispatcher.json',
  'deep_research.json',
  'market_seo_article_writer.json',
  'photo_text_translator.json',
  'seo_article_writer.json',
  'trip_planner.json',
];

const ECHO = graph({
  begin: ['Begin', { mode: 'conversational', prologue: 'Hi! Say something.' }, ['Message:Echo']],
  'Message:Echo': ['Message', { content: ['You said: {sys.query}. Thanks for writing, have a good day!'] }],
});
const echoed = (q: string) => `You said: ${q}. Thanks for writing, have a good day!`;
const FORM = graph({
  begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Ask']],
  'UserFillUp:Ask': ['UserFillUp', { tips: 'Your name?', inputs: { name: { name: 'Name', type: 'line', optional: false } } }, ['Message:Hi']],
  'Message:Hi': ['Message', { content: ['Hello {UserFillUp:Ask@name}.'] }],
});

interface Call {
  call: string;
  ok: boolean;
  value?: any;
  error?: string;
}
interface TemplateResult {
  file: string;
  sdk: { ok: boolean; error?: string };
  file_as_is: { ok: boolean; title: string | null; canvas_type: string | null; error?: string };
}
interface Report {
  calls: Call[];
  templates: TemplateResult[];
  dataset_calls_later: { call: string; why: string }[];
}

/** Why python3 cannot run the SDK here, or null. */
function pythonProblem(): string | null {
  const probe = spawnSync('python3', ['-c', 'import requests'], { encoding: 'utf8' });
  const fix = 'the RAGFlow SDK conformance suite needs python3 with requests (Debian: apt-get install python3 python3-requests)';
  if (probe.error) return `python3 is not installed: ${fix}`;
  if (probe.status !== 0) return `python3 has no "requests" module: ${fix} (${probe.stderr.trim().split('\n').at(-1)})`;
  return null;
}

/** A folder with a no-op `beartype` and the SDK's package metadata, for PYTHONPATH. */
function sdkShim(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ragflow-sdk-'));
  mkdirSync(join(dir, 'beartype'));
  writeFileSync(join(dir, 'beartype', '__init__.py'), '');
  writeFileSync(join(dir, 'beartype', 'claw.py'), 'def beartype_this_package(*args, **kwargs):\n    pass\n');
  mkdirSync(join(dir, 'ragflow_sdk-0.0.0.dist-info'));
  writeFileSync(join(dir, 'ragflow_sdk-0.0.0.dist-info', 'METADATA'), 'Metadata-Version: 2.1\nName: ragflow_sdk\nVersion: 0.0.0\n');
  return dir;
}

function runDriver(shim: string, config: unknown): Promise<Report> {
  return new Promise((done, fail) => {
    const child = spawn('python3', [DRIVER], { env: { ...process.env, PYTHONPATH: [shim, SDK].join(delimiter), PYTHONDONTWRITEBYTECODE: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      if (code !== 0) return fail(new Error(`the SDK driver exited with ${code}:\n${stderr.slice(-3000)}`));
      try {
        done(JSON.parse(stdout) as Report);
      } catch {
        fail(new Error(`the SDK driver printed no report:\n${stdout.slice(0, 2000)}\n${stderr.slice(-2000)}`));
      }
    });
    child.stdin.end(JSON.stringify(config));
  });
}

/** The missing components and tools a refusal names (lib/canvas/dsl.ts and the Agent's tool check). */
function missingIn(message: string): string[] {
  const names = [...message.matchAll(/unsupported (?:components|tool kinds): ([A-Za-z0-9_, ]+?)(?: \(|;|$)/g)].flatMap((m) => (m[1] as string).split(', '));
  return [...new Set(names)];
}

describe.skipIf(!present)('RAGFlow’s Python SDK against Easel', () => {
  let api: Served;
  let shim = '';
  let report: Report;
  const suffix = `c${Date.now().toString(36)}`;

  beforeAll(async () => {
    const problem = pythonProblem();
    if (problem) throw new Error(problem);
    api = await serveApp(testEngine());
    shim = sdkShim();
    report = await runDriver(shim, {
      base_url: api.url,
      api_key: api.adminKey,
      other_api_key: await api.addKey(newTenant(), 'admin'),
      corpus: CORPUS,
      suffix,
      agents: { echo: ECHO, triage: fixture('ragflow-begin-categorize'), form: FORM },
      documents: { 'guide.md': GUIDE_MD, 'faq.txt': FAQ_TXT, 'broken.pdf': BROKEN_PDF },
    });
    if (process.env.EASEL_SDK_REPORT) writeFileSync(process.env.EASEL_SDK_REPORT, JSON.stringify(report, null, 1));
  }, 60_000);
  afterAll(async () => {
    await api?.close();
    if (shim) rmSync(shim, { recursive: true, force: true });
  });

  const result = (name: string): Call => {
    const found = report.calls.find((c) => c.call === name);
    if (!found) throw new Error(`the driver made no call "${name}"`);
    return found;
  };
  const value = (name: string) => {
    const r = result(name);
    expect(r, `${name} raised: ${r.error}`).toMatchObject({ ok: true });
    return r.value;
  };
  const raised = (name: string) => {
    const r = result(name);
    expect(r.ok, `${name} should have raised`).toBe(false);
    return r.error;
  };
  const echoTitle = () => `Echo ${suffix}`;
  const created = () => value('create_dataset') as { id: string; description: string };

  it('creates, lists (paged, ordered, filtered), gets and updates agents', () => {
    expect(value('create_agent')).toBeNull();
    expect(value('create_agent (second)')).toBeNull();
    expect(raised('create_agent (title taken, other case)')).toBe(`${echoTitle().toUpperCase()} already exists.`);
    const listed = value('list_agents') as { id: string; title: string; description: string | null; canvas_type: string | null }[];
    expect(listed).toContainEqual({ id: expect.stringMatching(/^[0-9a-f]{32}$/), title: echoTitle(), description: 'Says it back', canvas_type: 'Agent' });
    expect(listed.map((a) => a.title)).toContain(`Triage ${suffix}`);
    expect(value('list_agents (page_size=1, oldest first)').map((a: { title: string }) => a.title)).toEqual([echoTitle()]);
    expect(value('list_agents (page 2 of 1, newest first)').map((a: { title: string }) => a.title)).toEqual([echoTitle()]);
    const filtered = value('GET /agents?keywords&canvas_type');
    expect(filtered).toMatchObject({ code: 0, data: { total: 1, canvas: [{ title: echoTitle() }] } });
    expect(value('get_agent')).toMatchObject({ title: echoTitle(), components: ['Message:Echo', 'begin'] });
    expect(value('update_agent')).toBeNull();
    expect(value('get_agent (after update)')).toMatchObject({ title: `Echo renamed ${suffix}`, description: 'Says it back, renamed', canvas_type: 'Other' });
    expect(raised('update_agent (title taken)')).toBe(`echo renamed ${suffix} already exists.`);
    expect(value('update_agent (DSL)')).toBeNull();
  });

  it('creates sessions with a name and a user, and lists them (paged, ordered, by id)', () => {
    const named = value('create_session (name, user_id)');
    expect(named).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), name: 'Support chat', user_id: 'user-1' });
    const plain = value('create_session');
    expect(plain).toMatchObject({ name: '', agent_id: named.agent_id });
    expect(value('list_sessions').map((s: { id: string }) => s.id).sort()).toEqual([named.id, plain.id].sort());
    expect(value('list_sessions (page_size=1, oldest first)')).toEqual([named]);
    expect(value('list_sessions (id)')).toEqual([named]);
  });

  it('asks without streaming: one message with the whole answer', () => {
    expect(value('ask (stream=False)')).toEqual([echoed('hello there')]);
    expect(value('ask (stream=False, inputs)')).toEqual(['Grace (gold): a refund agent will contact you.']);
  });

  // RAGFlow's server streams a Message as deltas (agent/canvas.py yields `{"content": m}` per
  // piece), and the SDK hands each frame to its user as a Message: the pieces, joined, are the
  // answer. (RAGFlow's documented loop, `print(ans.content[len(cont):])`, assumes the answer
  // so far in every frame, which RAGFlow's own server does not send either.)
  it('asks with streaming: the messages, joined, are the whole answer, as RAGFlow streams them', () => {
    const { contents } = value('ask (stream=True)') as { contents: string[]; shown: string };
    expect(contents.length).toBeGreaterThan(1);
    expect(contents.join('')).toBe(echoed('and again'));
  });

  it('keeps working when text sent while a form waits gets a notice: the form is asked again, then answered', () => {
    expect(value('create_agent (form)')).toBeNull();
    expect(value('ask (form waits)')).toEqual(['']);
    expect(value('ask (stream=False, form waits, text)')).toEqual(['']);
    // the stream holds user_inputs and the notice frame, no message: the SDK yields nothing
    expect(value('ask (stream=True, form waits, text)')).toEqual([]);
    expect(value('POST /agents/chat/completions (form waits, text)')).toMatchObject({ code: 0, data: { event: 'user_inputs', notice: { code: 'query_not_used' } } });
    expect(value('ask (stream=False, form answered)')).toEqual(['Hello Ada.']);
    expect(value('delete_agent (form)')).toBeNull();
  });

  it('deletes sessions by id and all of them, then the agents', () => {
    const named = value('create_session (name, user_id)');
    expect(value('delete_sessions (ids)')).toBeNull();
    const left = value('list_sessions (after delete)') as string[];
    expect(left).not.toContain(named.id);
    expect(left.length).toBe(2);
    expect(raised("delete_sessions (ids, not the agent's)")).toBe(`The agent doesn't own the session ${'f'.repeat(32)}`);
    expect(value('delete_sessions (delete_all)')).toBeNull();
    expect(value('list_sessions (after delete_all)')).toEqual([]);
    expect(value('delete_agent')).toBeNull();
    expect(raised('get_agent (deleted)')).toBe('canvas not found.');
    expect(value('delete_agent (second)')).toBeNull();
  });

  it('creates, lists (paged, by name and id), gets and updates datasets; refuses what Easel lacks in RAGFlow’s words', () => {
    const made = created();
    expect(made).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), name: `Manuals ${suffix}`, chunk_method: 'naive', permission: 'me', document_count: 0, parser_config: { chunk_token_num: 128, delimiter: '\n' } });
    expect(made.description).toContain('Product manuals');
    expect(value('create_dataset (second)')).toMatchObject({ name: `Notes ${suffix}`, parser_config: { chunk_token_num: 512 } });
    expect(raised('create_dataset (chunk_method=book)')).toBe("Field: <chunk_method> - Message: <Easel chunks with 'naive' only: 'book' is not supported> - Value: <book>");
    expect(raised('create_dataset (chunk_method=unknown)')).toMatch(/^Field: <chunk_method> - Message: <Input should be 'naive', 'book', /);
    expect(raised('create_dataset (empty name)')).toBe('Field: <name> - Message: <String should have at least 1 character> - Value: <>');
    expect(value('list_datasets').map((d: { name: string }) => d.name)).toEqual([`Notes ${suffix}`, `Manuals ${suffix}`]);
    expect(value('list_datasets (page_size=1, oldest first)')).toEqual([`Manuals ${suffix}`]);
    expect(value('list_datasets (page 2 of 1, newest first)')).toEqual([`Manuals ${suffix}`]);
    expect(value('list_datasets (name)')).toEqual([made.id]);
    expect(value('list_datasets (id)')).toEqual([`Manuals ${suffix}`]);
    // another tenant's dataset is refused exactly as a missing one
    const missing = raised('list_datasets (id, missing)');
    expect(raised("list_datasets (id, another tenant's)")).toBe(missing?.replace('f'.repeat(32), made.id));
    expect(value('get_dataset')).toBe(made.id);
    expect(value('DataSet.update')).toMatchObject({ id: made.id, name: `Manuals renamed ${suffix}`, parser_config: { chunk_token_num: 64 } });
    expect(raised('DataSet.update (chunk_method=qa)')).toBe("Field: <chunk_method> - Message: <Easel chunks with 'naive' only: 'qa' is not supported> - Value: <qa>");
    expect(raised('DataSet.update (parser_config.raptor)')).toBe('Field: <parser_config.raptor.use_raptor> - Message: <RAPTOR is not supported by Easel> - Value: <True>');
  });

  it('uploads documents, parses them (a broken one FAIL with its reason, the others DONE), lists their chunks and retrieves', () => {
    const uploaded = value('upload_documents') as { id: string; name: string; run: string }[];
    expect(uploaded.map((d) => [d.name, d.run])).toEqual([['guide.md', 'UNSTART'], ['faq.txt', 'UNSTART'], ['broken.pdf', 'UNSTART']]);
    const id = Object.fromEntries(uploaded.map((d) => [d.name, d.id]));
    expect(raised('upload_documents (unsupported type)')).toMatch(/^unsupported document type "\.mp4"; supported: .*\.md/);
    expect(raised("upload_documents (another tenant's dataset)")).toMatch(/^Can't find the dataset with ID [0-9a-f]{32}!$/);
    expect(value('list_documents')).toEqual([['broken.pdf', 'UNSTART'], ['faq.txt', 'UNSTART'], ['guide.md', 'UNSTART']]);
    expect(value('list_documents (keywords)')).toEqual(['guide.md']);
    // async_parse_documents answers once parsing is over: the status the SDK polls is final at once
    expect(value('async_parse_documents')).toBeNull();
    const after = value('list_documents (after async_parse_documents)');
    expect(after['guide.md']).toMatchObject({ run: 'DONE', progress: 1, type: 'doc' });
    expect(after['guide.md'].chunk_count).toBeGreaterThan(0);
    expect(after['broken.pdf']).toMatchObject({ run: 'FAIL', chunk_count: 0, type: 'pdf' });
    expect(after['broken.pdf'].progress_msg).not.toBe('');
    expect(after['faq.txt']).toMatchObject({ run: 'UNSTART' });
    expect(value('parse_documents')).toEqual([[id['faq.txt'], 'DONE', expect.any(Number), expect.any(Number)]]);
    expect(raised('async_cancel_parse_documents (parsed)')).toBe("Can't stop parsing document that has not started or already completed");
    expect(raised('async_parse_documents (missing)')).toBe(`Documents not found: ['${'e'.repeat(32)}']`);
    const chunks = value('Document.list_chunks') as { content: string; document_id: string; dataset_id: string }[];
    expect(chunks.length).toBe(after['guide.md'].chunk_count);
    expect(chunks[0]).toMatchObject({ document_id: id['guide.md'], content: expect.stringContaining('Espresso machine guide') });
    expect(value('Document.list_chunks (keywords)')).toEqual([expect.stringContaining('citric acid')]);
    const retrieved = value('retrieve') as { content: string; document_id: string; document_name: string; similarity: number }[];
    expect(retrieved[0]).toMatchObject({ document_id: id['guide.md'], document_name: 'guide.md', content: expect.stringContaining('two years') });
    expect(retrieved[0]?.similarity).toBeGreaterThan(0);
    expect(value('retrieve (document_ids)')).toEqual([id['faq.txt']]);
    expect(raised('retrieve (rerank_id)')).toMatch(/^Rerank models are not supported by Easel/);
    expect(raised('retrieve (keyword)')).toMatch(/^`keyword` .* is not supported by Easel/);
    expect(raised("retrieve (another tenant's dataset)")).toBe(raised('retrieve (missing dataset)')?.replace('f'.repeat(32), created().id));
  });

  it('deletes documents (retrieval no longer finds them) and datasets, by id and all of them', () => {
    expect(value('delete_documents')).toBeNull();
    const guide = (value('upload_documents') as { id: string; name: string }[]).find((d) => d.name === 'guide.md')?.id;
    expect(value('retrieve (after delete_documents)')).toEqual([guide]);
    expect(raised('delete_documents (missing)')).toMatch(new RegExp(`Document not found: ${'e'.repeat(32)}$`));
    expect(raised("delete_datasets (another tenant's)")).toMatch(new RegExp(`lacks permission for datasets: '${created().id}'$`));
    expect(value('delete_datasets')).toBeNull();
    expect(value('list_datasets (after delete_datasets)')).toEqual([`Notes ${suffix}`]);
    expect(value('delete_datasets (delete_all)')).toBeNull();
    expect(value('list_datasets (after delete_all)')).toEqual([]);
  });

  it('lists the SDK’s dataset calls Easel does not serve, each with why', () => {
    expect(report.dataset_calls_later.map((c) => c.call)).toEqual(['Document.update', 'Document.download', 'Document.add_chunk', 'Document.delete_chunks', 'Chunk.update']);
    for (const c of report.dataset_calls_later) expect(c.why, c.call).not.toBe('');
  });

  it('imports the stock templates Easel can run, and names what each other one lacks', () => {
    const imported = report.templates.filter((t) => t.sdk.ok).map((t) => t.file);
    const refused = report.templates.filter((t) => !t.sdk.ok);
    console.log([
      `RAGFlow stock templates: ${imported.length} of ${report.templates.length} import (${imported.join(', ')})`,
      ...refused.map((t) => `  refused ${t.file}: ${missingIn(t.sdk.error ?? '').join(', ') || t.sdk.error}`),
      `  dataset calls for later: ${report.dataset_calls_later.length}`,
    ].join('\n'));
    expect(report.templates.length).toBeGreaterThanOrEqual(19);
    expect(imported.length).toBeGreaterThanOrEqual(IMPORTED_TODAY.length);
    for (const file of IMPORTED_TODAY) expect(imported).toContain(file);
    for (const t of refused) expect(missingIn(t.sdk.error ?? ''), `${t.file}: ${t.sdk.error}`).not.toEqual([]);
    // the template file posted as it ships is taken the same way, with its English title and canvas type;
    // two files share the title "SEO article writer", and the second into the same tenant is refused, as RAGFlow refuses it
    const takenTitle = report.templates.filter((t) => t.sdk.ok && !t.file_as_is.ok);
    expect(takenTitle.map((t) => [t.file, t.file_as_is.error])).toEqual([['seo_article_writer.json', 'SEO article writer already exists.']]);
    expect(report.templates.filter((t) => t.file_as_is.ok).map((t) => t.file)).toEqual(imported.filter((f) => f !== 'seo_article_writer.json'));
    expect(report.templates.find((t) => t.file === 'customer_feedback_dispatcher.json')?.file_as_is).toMatchObject({ title: 'Customer feedback disptacher', canvas_type: 'Customer Support' });
  });
});
