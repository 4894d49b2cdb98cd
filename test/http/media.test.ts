/**
 * Images and documents reach the model, end to end: RAGFlow's stock photo_text_translator
 * template imported as it ships, a real PNG uploaded, the turn run through the HTTP API on
 * DynamoDB Local, and the image bytes compared where they arrive — at a local OpenAI-compatible
 * server as an `image_url` part, at a local Bedrock ConverseStream server as an `image` block.
 * Documents arrive as text; the caps refuse images and cut documents as documented; echo says
 * it cannot see images; call records keep an image's hash, never its bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../lib/canvas/calls';
import type { AttachmentLimits } from '../../lib/components/attachments';
import { services } from '../../lib/components/services';
import { createBedrockProvider } from '../../lib/llm/bedrock';
import { createModelResolver, DEFAULT_RETRY } from '../../lib/llm';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { getTurn } from '../../lib/store/sessions';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { png } from '../helpers/png';
import { testServices } from '../helpers/services';
import { BedrockTestServer, textAnswer } from '../llm/bedrock-server';
import { OpenAiServer } from '../llm/openai-server';

const template = fixture('ragflow-templates/photo_text_translator') as { title: { en: string }; dsl: Record<string, unknown> };
const BEDROCK_MODEL = 'anthropic.claude-3-5-sonnet-20240620-v1:0';
const photo = png(6, 4, 1);

let openai: OpenAiServer;
let bedrock: BedrockTestServer;
let viaOpenai: Served;
let viaBedrock: Served;
let viaEcho: Served;

function bedrockServices() {
  const provider = createBedrockProvider({
    region: 'us-east-1',
    endpoint: bedrock.endpoint,
    credentials: { accessKeyId: 'AKIAEASELTESTFAKE0003', secretAccessKey: 'fake-secret-for-media-tests-00000000000000' },
    timeoutMs: 30_000,
    retry: { ...DEFAULT_RETRY, attempts: 1 },
  });
  const models = createModelResolver({ defaultModel: `bedrock:${BEDROCK_MODEL}`, models: {}, timeoutMs: 30_000, retry: DEFAULT_RETRY }, { bedrock: provider });
  return services({ models, guard: new SsrfGuard({ allow: [] }) });
}

/** The app on an OpenAI-compatible model, with these caps on what a call is shown. */
async function openaiApp(limits?: Partial<AttachmentLimits>): Promise<Served> {
  const engine = testEngine({ openaiUrl: openai.url });
  return serveApp({ ...engine, services: { ...testServices({ openaiUrl: openai.url }), ...(limits ? { attachmentLimits: limits } : {}) } });
}

beforeAll(async () => {
  openai = await OpenAiServer.start();
  bedrock = await BedrockTestServer.start();
  viaOpenai = await openaiApp();
  viaBedrock = await serveApp({ ...testEngine(), services: bedrockServices() });
  viaEcho = await serveApp(testEngine());
});
afterAll(async () => {
  await Promise.all([viaOpenai.close(), viaBedrock.close(), viaEcho.close()]);
  await openai.close();
  await bedrock.close();
});

async function upload(api: Served, name: string, type: string, content: string | Uint8Array): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([content], { type }), name);
  const res = await fetch(`${api.url}/workflows/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${api.adminKey}` }, body: form });
  expect(res.status).toBe(201);
  return ((await res.json()) as { file_id: string }).file_id;
}

async function importWorkflow(api: Served, dsl: unknown = template.dsl, name = template.title.en): Promise<string> {
  const res = await api.call('POST', '/workflows/v1/workflows', { body: { name, dsl } });
  expect(res.status, res.text).toBe(201);
  return res.json.id as string;
}

const execute = (api: Served, workflowId: string, body: unknown) => api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body });

/** The last user message's text as the OpenAI-compatible server received it. */
const lastUserText = () => openai.requests.at(-1)?.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

describe('photo_text_translator, imported from RAGFlow’s stock template', () => {
  it.each([
    ['the OpenAI-compatible provider', () => viaOpenai],
    ['Bedrock Converse', () => viaBedrock],
  ])('shows an uploaded PNG to the model through %s, byte for byte', async (name, app) => {
    const api = app();
    const onBedrock = name === 'Bedrock Converse';
    if (onBedrock) bedrock.enqueue(textAnswer('It says: EXIT.'));
    else openai.enqueue({ kind: 'text', text: 'It says: EXIT.' });
    const before = onBedrock ? bedrock.calls : openai.calls;

    const wf = await importWorkflow(api);
    const fileId = await upload(api, 'sign.png', 'image/png', photo);
    const res = await execute(api, wf, { run_input: { query: 'Translate this sign into English', files: [fileId] } });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ status: 'completed', outputs: { content: 'It says: EXIT.' } });

    if (onBedrock) {
      expect(bedrock.calls - before).toBe(1);
      const request = bedrock.requests.at(-1);
      expect(request?.modelId).toBe(BEDROCK_MODEL);
      expect(request?.images).toHaveLength(1);
      expect(request?.images[0]?.format).toBe('png');
      expect(request?.images[0]?.bytes.equals(photo)).toBe(true);
      const user = request?.body.messages.at(-1);
      expect(user.content.find((b: { text?: string }) => b.text)?.text).toContain('The user query is Translate this sign into English');
      expect(request?.body.system[0].text).toContain('multilingual translation assistant');
    } else {
      expect(openai.calls - before).toBe(1);
      const request = openai.requests.at(-1);
      expect(request?.images).toHaveLength(1);
      expect(request?.images[0]?.mime_type).toBe('image/png');
      expect(request?.images[0]?.bytes.equals(photo)).toBe(true);
      expect(lastUserText()).toContain('The user query is Translate this sign into English');
    }

    // what the turn keeps names the image by its hash; its bytes are nowhere in it
    const base64 = photo.toString('base64');
    const stored = await getTurn(api.engine.store, api.tenant, res.json.run_id, 1);
    const record = JSON.stringify(stored);
    expect(record).not.toContain(base64.slice(8, 48));
    expect(JSON.stringify(res.json)).not.toContain(base64.slice(8, 48));
    const calls = (stored?.calls as { records: CallRecord[] }).records;
    expect(calls.map((c) => [c.component_id, c.kind, c.status])).toEqual([['Agent:CoolPandasCrash', 'model', 'ok']]);
  });

  it('shows the PNG through RAGFlow’s API as well: an agent upload, then `files` on the completion', async () => {
    openai.enqueue({ kind: 'text', text: 'Sortie.' });
    const created = await viaOpenai.call('POST', '/api/v1/agents', { body: { title: `${template.title.en} ${Date.now()}`, dsl: template.dsl } });
    expect(created.json.code).toBe(0);
    const agents = await viaOpenai.call('GET', `/api/v1/agents?title=${encodeURIComponent(created.json.data?.title ?? '')}`);
    const agentId = (created.json.data?.id ?? agents.json.data?.[0]?.id) as string;
    const form = new FormData();
    form.append('file', new Blob([photo], { type: 'image/png' }), 'sign.png');
    const up = await fetch(`${viaOpenai.url}/api/v1/agents/${agentId}/upload`, { method: 'POST', headers: { authorization: `Bearer ${viaOpenai.adminKey}` }, body: form });
    const descriptor = ((await up.json()) as { data: Record<string, unknown> }).data;
    const res = await viaOpenai.call('POST', `/api/v1/agents/${agentId}/completions`, { body: { question: 'In French please', stream: false, files: [descriptor] } });
    expect(res.json.code).toBe(0);
    expect(res.json.data.data.content).toBe('Sortie.');
    expect(openai.requests.at(-1)?.images[0]?.bytes.equals(photo)).toBe(true);
  });

  it('on echo, says that the model cannot see the image instead of pretending', async () => {
    const wf = await importWorkflow(viaEcho);
    const fileId = await upload(viaEcho, 'sign.png', 'image/png', photo);
    const res = await execute(viaEcho, wf, { run_input: { query: 'Translate this', files: [fileId] } });
    expect(res.json.status).toBe('completed');
    expect(res.json.outputs.content).toContain('echo: The user query is Translate this');
    expect(res.json.outputs.content).toContain(`[echo cannot see images: it was given 1 image (image/png, ${photo.length} bytes)]`);
  });
});

describe('documents', () => {
  it('arrive as text in the last user message: text, CSV and JSON as they are, HTML without its tags; a PDF is named, not read', async () => {
    openai.enqueue({ kind: 'text', text: 'Read.' });
    const wf = await importWorkflow(viaOpenai);
    const files = [
      await upload(viaOpenai, 'prices.csv', 'text/csv', 'item,price\ntea,3\ncoffee,4\n'),
      await upload(viaOpenai, 'notes.txt', 'text/plain', 'Open from 9 to 5.'),
      await upload(viaOpenai, 'page.html', 'text/html', '<html><head><style>p{color:red}</style></head><body><h1>Menu</h1><p>Soup &amp; bread</p><script>alert(1)</script></body></html>'),
      await upload(viaOpenai, 'config.json', 'application/json', '{"lang": "fr"}'),
      await upload(viaOpenai, 'scan.pdf', 'application/pdf', '%PDF-1.7\n%\u00e2\u00e3\n1 0 obj\n'),
    ];
    const res = await execute(viaOpenai, wf, { run_input: { query: 'Summarise', files } });
    expect(res.json.status).toBe('completed');
    const text = lastUserText();
    expect(text.startsWith('The user query is Summarise')).toBe(true);
    expect(text).toContain('--- prices.csv (text/csv) ---\nitem,price\ntea,3\ncoffee,4\n\n--- end of prices.csv ---');
    expect(text).toContain('--- notes.txt (text/plain) ---\nOpen from 9 to 5.\n--- end of notes.txt ---');
    expect(text).toContain('--- page.html (text/html) ---\nMenu\nSoup & bread\n--- end of page.html ---');
    expect(text).toContain('{"lang": "fr"}');
    expect(text).toContain('[scan.pdf (application/pdf) is not included: PDF text is not extracted here;');
    expect(text).not.toContain('alert(1)');
    // documents only: the message stays a string
    expect(typeof openai.requests.at(-1)?.contents.at(-1)).toBe('string');
  });

  it('are not added again when a prompt names {sys.files} itself (as RAGFlow); its images still go as images', async () => {
    openai.enqueue({ kind: 'text', text: 'ok' });
    const dsl = graph({
      begin: ['Begin', { mode: 'conversational' }, ['LLM:Read']],
      'LLM:Read': ['LLM', { llm_id: 'any', sys_prompt: 'Files: {sys.files}', prompts: [{ role: 'user', content: '{sys.query}' }] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{LLM:Read@content}'] }],
    });
    const wf = await importWorkflow(viaOpenai, dsl, 'explicit');
    const files = [await upload(viaOpenai, 'a.txt', 'text/plain', 'alpha beta'), await upload(viaOpenai, 'p.png', 'image/png', photo)];
    await execute(viaOpenai, wf, { run_input: { query: 'go', files } });
    const request = openai.requests.at(-1);
    expect(request?.body.messages[0]?.content).toContain('"name":"a.txt"');
    expect(request?.body.messages[0]?.content).toContain('"text":"alpha beta"');
    expect(lastUserText()).toBe('go');
    expect(request?.images.map((i) => i.bytes.equals(photo))).toEqual([true]);
  });
});

describe('visual_files_var', () => {
  it('shows the images of the variable it names, here a Begin file field', async () => {
    openai.enqueue({ kind: 'text', text: 'A square.' });
    const dsl = graph({
      begin: ['Begin', { mode: 'task', inputs: { photo: { name: 'Photo', type: 'file', optional: false } } }, ['LLM:Look']],
      'LLM:Look': ['LLM', { llm_id: 'any', visual_files_var: 'begin@photo', prompts: [{ role: 'user', content: 'Describe the photo.' }] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{LLM:Look@content}'] }],
    });
    const wf = await importWorkflow(viaOpenai, dsl, 'look');
    const other = png(3, 3, 5);
    const fileId = await upload(viaOpenai, 'square.png', 'application/octet-stream', other);
    const res = await execute(viaOpenai, wf, { run_input: { inputs: { photo: fileId } } });
    expect(res.json).toMatchObject({ status: 'completed', outputs: { content: 'A square.' } });
    const request = openai.requests.at(-1);
    // the type is told by the bytes, whatever the upload claimed
    expect(request?.images.map((i) => i.mime_type)).toEqual(['image/png']);
    expect(request?.images[0]?.bytes.equals(other)).toBe(true);
    expect(lastUserText()).toBe('Describe the photo.');
  });

  it('must name a variable: a DSL with another value is refused at import', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['LLM:Look']],
      'LLM:Look': ['LLM', { visual_files_var: 'Nowhere:X@files' }, []],
    });
    const res = await viaOpenai.call('POST', '/workflows/v1/workflows', { body: { name: 'bad', dsl } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.json)).toContain('references a missing component \\"Nowhere:X\\"');
  });
});

describe('caps', () => {
  const small = png(2, 2, 1);
  const small2 = png(2, 2, 2);
  const big = png(64, 64, 3);
  let capped: Served;
  beforeAll(async () => {
    expect(big.length).toBeGreaterThan(small.length + small2.length);
    capped = await openaiApp({ maxImageBytes: big.length - 1, maxImagesBytes: small.length + small2.length - 1, maxDocumentChars: 40 });
  });
  afterAll(async () => {
    await capped.close();
  });

  it('refuse an image over the per-image cap: the turn fails naming the file and the cap, and no model is called', async () => {
    const wf = await importWorkflow(capped);
    const before = openai.calls;
    const res = await execute(capped, wf, { run_input: { query: 'x', files: [await upload(capped, 'huge.png', 'image/png', big)] } });
    expect(res.json.status).toBe('failed');
    const failed = res.json.events.at(-1);
    expect(failed.event).toBe('workflow_failed');
    expect(failed.data.error.component_id).toBe('Agent:CoolPandasCrash');
    expect(failed.data.error.message).toContain(`the image huge.png is ${(big.length / 1024).toFixed(1)} KiB; an image shown to a model may have at most`);
    expect(openai.calls).toBe(before);
  });

  it('refuse images past the total of one call', async () => {
    const wf = await importWorkflow(capped);
    const before = openai.calls;
    const files = [await upload(capped, 'one.png', 'image/png', small), await upload(capped, 'two.png', 'image/png', small2)];
    const res = await execute(capped, wf, { run_input: { query: 'x', files } });
    expect(res.json.status).toBe('failed');
    expect(res.json.events.at(-1).data.error.message).toContain(`the images of one model call come to ${small.length + small2.length} bytes with two.png; at most`);
    expect(openai.calls).toBe(before);
  });

  it('cut document text at the cap, with a marker, and leave out documents past it', async () => {
    openai.enqueue({ kind: 'text', text: 'ok' });
    const wf = await importWorkflow(capped);
    const long = 'a'.repeat(30);
    const files = [await upload(capped, 'first.txt', 'text/plain', long), await upload(capped, 'second.txt', 'text/plain', 'b'.repeat(30)), await upload(capped, 'third.txt', 'text/plain', 'c')];
    const res = await execute(capped, wf, { run_input: { query: 'x', files } });
    expect(res.json.status).toBe('completed');
    const text = lastUserText();
    expect(text).toContain(`--- first.txt (text/plain) ---\n${long}\n--- end of first.txt ---`);
    expect(text).toContain(`--- second.txt (text/plain) ---\n${'b'.repeat(10)}\n[second.txt is cut here: it has 30 characters; the documents of one call are limited to 40]\n--- end of second.txt ---`);
    expect(text).toContain('[third.txt (text/plain) is left out: the documents of one call are limited to 40 characters of text]');
  });
});

describe('files of a turn', () => {
  it('are resolved before the turn: an id of another tenant or none is an invalid input, and no turn is consumed', async () => {
    const wf = await importWorkflow(viaOpenai);
    const strangerKey = await viaOpenai.addKey(newTenant(), 'admin');
    const form = new FormData();
    form.append('file', new Blob([photo], { type: 'image/png' }), 'theirs.png');
    const theirs = ((await (await fetch(`${viaOpenai.url}/workflows/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${strangerKey}` }, body: form })).json()) as { file_id: string }).file_id;
    for (const files of [[theirs], ['not-a-file']]) {
      const res = await execute(viaOpenai, wf, { run_input: { query: 'x', files } });
      expect(res.status).toBe(422);
      expect(res.json).toMatchObject({ code: 'invalid_inputs', fields: [{ field: 'files' }] });
    }
  });
});
