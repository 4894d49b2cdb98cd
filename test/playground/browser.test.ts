/**
 * The playground in a real headless Chromium (Debian's `chromium` through playwright-core)
 * against the app served on 127.0.0.1: the form-intake fixture completed through the page
 * at desktop and phone sizes (key typed, workflow picked, the prologue, message sent, form
 * filled and submitted, the streamed "Welcome ..." message; on a phone the conversation takes
 * the height and Submit is in view) with the docs' screenshots taken on the way; every field type
 * including a file upload; two tabs on one run, where the stale one is told the turn was
 * already answered and reloads; and the page embedded in an iframe of another origin with an
 * execute key passed once in the URL.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { createWorkflow as create, DESKTOP, failOnPageProblems, launchChromium, newPage as open, PHONE, screenshot, textOf as text, type Viewport } from './chromium';

const ALL_FIELDS = JSON.parse(readFileSync(new URL('./all-fields.json', import.meta.url), 'utf8')) as Record<string, unknown>;

let browser: Browser;
let api: Served;

beforeAll(async () => {
  [browser, api] = await Promise.all([launchChromium(), serveApp(testEngine())]);
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
});

failOnPageProblems();

const createWorkflow = (name: string, dsl: unknown, on: Served = api) => create(on, name, dsl);
const newPage = (context?: BrowserContext, viewport: Viewport = DESKTOP): Promise<Page> => open(browser, context ? { context } : { viewport });

/** Nothing covers the middle of the element: a click there reaches it. */
const uncovered = (element: Locator) => element.evaluate((node) => {
  const r = node.getBoundingClientRect();
  return node.ownerDocument.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === node;
});

/** Begin -> UserFillUp:Review (one field and two decisions) -> a Message for each decision. */
function reviewWorkflow(tips: string, field: Record<string, unknown>, decisions: { id: string; label: string; says: string }[]) {
  const key = Object.keys(field)[0] as string;
  const components: Record<string, unknown> = {
    begin: { obj: { component_name: 'Begin', params: { mode: 'conversational' } }, downstream: ['UserFillUp:Review'], upstream: [] },
    'UserFillUp:Review': {
      obj: { component_name: 'UserFillUp', params: { tips, inputs: field, decisions: decisions.map((d) => ({ id: d.id, label: d.label, to: `Message:${d.id}` })) } },
      downstream: decisions.map((d) => `Message:${d.id}`),
      upstream: ['begin'],
    },
  };
  for (const d of decisions) {
    components[`Message:${d.id}`] = { obj: { component_name: 'Message', params: { content: [`${d.says}: {UserFillUp:Review@${key}}`] } }, downstream: [], upstream: ['UserFillUp:Review'] };
  }
  return { components, globals: {}, variables: {} };
}

describe('the playground in Chromium', () => {
  it.each([
    ['desktop', DESKTOP, 'playground-desktop.png'],
    ['phone', PHONE, 'playground-phone.png'],
  ] as const)('completes the form-intake workflow at %s size: key, workflow, prologue, message, form, streamed answer', async (size, viewport, picture) => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const page = await newPage(undefined, viewport);
    await page.goto(`${api.url}/playground`);

    // a key the server refuses is said so; the key is then typed once
    await page.getByLabel('API key').fill('not-a-valid-key-0123456789');
    await page.getByRole('button', { name: 'Use key' }).click();
    await page.getByRole('alert').getByText('The server refused the API key').waitFor();
    await page.getByLabel('API key').fill(api.adminKey);
    await page.getByRole('button', { name: 'Use key' }).click();
    await page.getByLabel('Workflow').selectOption(wf);
    expect(await page.evaluate('sessionStorage.getItem("easel.playground.key")')).toBe(api.adminKey);
    // the Begin's prologue comes first
    await page.locator('.entry.prologue').getByText("Hello! Let's get you registered.").waitFor();

    // a message starts the run; the pause is a form
    await page.getByLabel('Message').fill('I would like to sign up');
    await page.getByLabel('Message').press('Enter');
    const form = page.locator('form.form');
    await form.waitFor();
    await page.getByText('Tell us about yourself (you said: I would like to sign up)').waitFor();
    expect(await text(page, '#fact-status')).toBe('waiting_for_input');
    expect(await text(page, '#fact-turn')).toBe('1');
    const runId = await text(page, '#fact-run');
    expect(runId).toMatch(/^[0-9a-f]{32}$/);
    expect(page.url()).toContain(`run=${runId}`);
    expect(await page.locator('#transcript > li').first().getAttribute('class')).toContain('prologue');
    // the first field has the focus; required and optional fields are marked
    expect(await page.evaluate('document.activeElement?.getAttribute("name")')).toBe('name');
    expect(await form.getByLabel('Full name').getAttribute('required')).toBe('');
    await form.getByText('(optional)').first().waitFor();

    const submit = form.getByRole('button', { name: 'Submit' });
    if (size === 'phone') {
      // the conversation takes the height; the run's panel is folded away behind a button
      const conversation = await page.locator('#transcript').boundingBox();
      expect(conversation!.height).toBeGreaterThanOrEqual(viewport.height / 2);
      expect(await page.locator('#side').isVisible()).toBe(false);
      const toggle = page.getByRole('button', { name: 'Run details' });
      expect(await toggle.getAttribute('aria-expanded')).toBe('false');
      await toggle.click();
      await page.locator('#side').getByText(runId).waitFor({ state: 'visible' });
      await page.keyboard.press('Escape');
      await page.locator('#side').waitFor({ state: 'hidden' });
      // Submit is on screen, not covered, without scrolling the page or the conversation
      expect(await page.evaluate('[window.scrollY, document.documentElement.scrollWidth <= innerWidth]')).toEqual([0, true]);
      const box = (await submit.boundingBox())!;
      expect(box.y).toBeGreaterThanOrEqual(0);
      expect(box.y + box.height).toBeLessThanOrEqual(viewport.height);
      expect(box.x + box.width).toBeLessThanOrEqual(viewport.width);
      expect(await uncovered(submit)).toBe(true);
    }

    await form.getByLabel('Full name').fill('Ada');
    await form.getByLabel('Age').fill('36');
    await form.getByLabel('Plan').selectOption('pro');
    await form.getByLabel('Newsletter').check();
    await form.getByLabel('Profile').fill('{"city": "London"}');
    // the docs' picture: the form, filled in, about to be submitted
    if (size === 'phone') await form.getByLabel('Full name').scrollIntoViewIfNeeded();
    await screenshot(page, picture);
    await submit.click();

    await page.getByText('Welcome Ada (36), plan pro; city London.').waitFor();
    // (on a phone the run's facts are in the folded panel: there, not visible)
    await page.locator('#fact-status').filter({ hasText: 'completed' }).waitFor({ state: 'attached' });
    expect(await text(page, '#fact-turn')).toBe('2');
    expect(await page.locator('form.form').count()).toBe(0);
    const timeline = await page.locator('#timeline .ev-name').allTextContents();
    expect(timeline).toEqual(expect.arrayContaining(['workflow_started', 'user_inputs', 'node_finished', 'message', 'workflow_finished', 'turn_response']));
    expect(await page.locator('.entry.user').last().textContent()).toContain('Ada');

    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(run.json).toMatchObject({ status: 'completed', turn_number: 2 });
    await page.close();
  });

  it('renders every field type, uploads a file through /files and sends its id', async () => {
    const wf = await createWorkflow('All fields', ALL_FIELDS);
    const page = await newPage();
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    await page.getByText(`All fields (${wf})`).waitFor();
    await page.getByLabel('Message').fill('report');
    await page.getByRole('button', { name: 'Send' }).click();
    const form = page.locator('form.form');
    await form.waitFor();

    const control = async (label: string) => form.getByLabel(label).evaluate((el) => `${el.tagName.toLowerCase()}:${el.getAttribute('type') ?? ''}:${el.getAttribute('step') ?? ''}`);
    expect(await control('Title')).toBe('input:text:');
    expect(await control('Summary')).toBe('textarea::');
    expect(await control('Size')).toBe('select::');
    expect(await control('Count')).toBe('input:number:1');
    expect(await control('Ratio')).toBe('input:number:any');
    expect(await control('Weight')).toBe('input:number:any');
    expect(await control('Urgent')).toBe('input:checkbox:');
    expect(await control('Metadata')).toBe('textarea::');
    expect(await control('Document')).toBe('input:file:');

    await form.getByLabel('Title').fill('Broken lamp');
    await form.getByLabel('Summary').fill('It flickers.\nThen it stops.');
    await form.getByLabel('Size').selectOption('large');
    await form.getByLabel('Count').fill('3');
    await form.getByLabel('Ratio').fill('0.25');
    await form.getByLabel('Urgent').check();
    // invalid JSON is refused by the page itself
    await form.getByLabel('Metadata').fill('{not json');
    await form.getByLabel('Document').setInputFiles({ name: 'lamp.txt', mimeType: 'text/plain', buffer: Buffer.from('flicker flicker') });
    await form.getByRole('button', { name: 'Submit' }).click();
    expect(await form.getByLabel('Metadata').evaluate((el) => (el as unknown as { validationMessage: string }).validationMessage)).toContain('valid JSON');
    expect(await text(page, '#fact-turn')).toBe('1');
    await form.getByLabel('Metadata').fill('{"tag": "lights"}');
    await form.getByRole('button', { name: 'Submit' }).click();

    const message = page.locator('.entry.assistant').filter({ hasText: 'Filed Broken lamp' });
    await message.waitFor();
    // rendered as markdown: its line break is a <br>, read back as a newline
    const content = await message.innerText();
    expect(content).toContain('It flickers.\nThen it stops. / size large / count 3 / ratio 0.25 / urgent true / tag lights / doc {"file_id":"file_');
    // the workflow sees the uploaded file resolved from the id the page sent
    expect(content).toContain('"name":"lamp.txt","size":15,"mime_type":"text/plain","text":"flicker flicker"');
    const fileId = /"file_id":"(file_[0-9a-f]{32})"/.exec(content)?.[1];
    const stored = await api.call('GET', `/workflows/v1/files/${fileId}`);
    expect(stored.json).toMatchObject({ name: 'lamp.txt', size: 15 });
    await page.close();
  });

  it('keeps a long form\'s Submit in view at phone size, wherever the form is scrolled', async () => {
    const wf = await createWorkflow('All fields', ALL_FIELDS);
    const page = await newPage(undefined, PHONE);
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    await page.getByLabel('Message').fill('report');
    await page.getByRole('button', { name: 'Send' }).click();
    const form = page.locator('form.form');
    await form.waitFor();
    const transcript = page.locator('#transcript');
    // the form is taller than the conversation: it scrolls inside it
    expect((await form.boundingBox())!.height).toBeGreaterThan((await transcript.boundingBox())!.height);
    const submit = form.getByRole('button', { name: 'Submit' });
    /** Submit is inside the conversation's visible part and nothing covers it. */
    const inView = async () => {
      const area = (await transcript.boundingBox())!;
      const box = (await submit.boundingBox())!;
      return box.y >= area.y && box.y + box.height <= area.y + area.height && (await uncovered(submit));
    };
    for (const where of ['start', 'center', 'end'] as const) {
      await form.evaluate((node, block) => node.scrollIntoView({ block }), where);
      expect(await inView(), `scrolled to its ${where}`).toBe(true);
    }
    // clicked where it is: the browser's own check of the required fields answers
    await form.evaluate((node) => node.scrollIntoView({ block: 'start' }));
    await submit.click();
    expect(await form.getByLabel('Title').evaluate((input) => input.matches(':invalid'))).toBe(true);
    expect(await text(page, '#fact-turn')).toBe('1');
    await page.close();
  });

  it('shows a decision as buttons: Enter in a field picks none, a click sends that decision and its branch runs', async () => {
    const wf = await createWorkflow('Refund review', reviewWorkflow('Refund this order?', { note: { name: 'Note', type: 'line', optional: true } }, [
      { id: 'approve', label: 'Approve refund', says: 'Refunded' },
      { id: 'reject', label: 'Reject', says: 'Refused' },
    ]));
    const page = await newPage();
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    await page.getByText(`Refund review (${wf})`).waitFor();
    await page.getByLabel('Message').fill('order 42');
    await page.getByRole('button', { name: 'Send' }).click();
    const form = page.locator('form.form');
    await form.waitFor();
    const group = form.getByRole('group', { name: 'Decision' });
    expect(await group.getByRole('button').allTextContents()).toEqual(['Approve refund', 'Reject']);
    expect(await form.getByRole('button', { name: 'Submit' }).count()).toBe(0);

    // Enter in the note submits nothing: no button is the form's default
    await form.getByLabel('Note').fill('damaged in transit');
    await form.getByLabel('Note').press('Enter');
    expect(await text(page, '#fact-turn')).toBe('1');
    expect(await form.isVisible()).toBe(true);

    await group.getByRole('button', { name: 'Reject' }).click();
    await page.getByText('Refused: damaged in transit').waitFor();
    expect(await page.locator('.entry.user').last().textContent()).toContain('Reject');
    const runId = await text(page, '#fact-run');
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    const answered = (turns.json.items as { request?: { run_input?: { inputs?: unknown } } }[]).at(-1)?.request?.run_input?.inputs;
    expect(answered).toEqual({ note: 'damaged in transit', decision: 'reject' });
    await page.close();
  });

  it('answers a form through a form link, with no key anywhere in the page, once', async () => {
    const wf = await createWorkflow('Link review', reviewWorkflow('Approve the trip to Porto?', { reason: { name: 'Reason', type: 'paragraph', optional: false } }, [
      { id: 'yes', label: 'Approve', says: 'Approved' },
      { id: 'no', label: 'Decline', says: 'Declined' },
    ]));
    const first = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'trip' } } });
    const link = await api.call('POST', `/workflows/v1/workflow-runs/${first.json.run_id}/form-links`, {});
    expect(link.status).toBe(201);
    const page = await newPage();
    const sent: { url: string; authorization?: string }[] = [];
    page.on('request', (r) => sent.push({ url: r.url(), ...(r.headers().authorization ? { authorization: r.headers().authorization! } : {}) }));
    await page.goto(`${api.url}${link.json.url}`);
    await page.getByText('Approve the trip to Porto?').waitFor();
    const form = page.locator('form.form');
    await form.getByLabel('Reason').fill('Customer visit');
    await form.getByRole('group', { name: 'Decision' }).getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Thank you: your answer was sent.').waitFor();
    // no key went out, and the token never appeared in a URL the browser requested
    expect(sent.every((r) => r.authorization === undefined)).toBe(true);
    expect(sent.some((r) => r.url.includes(link.json.token))).toBe(false);
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${first.json.run_id}/turns/2`);
    expect(turn.json.request.actor).toEqual({ kind: 'form_link', id: link.json.link_id });
    expect(JSON.stringify(turn.json.response.events)).toContain('Approved: Customer visit');

    // opened again, the link says it was used
    await page.reload();
    await page.getByText('This form has been answered already.').waitFor();
    expect(await page.locator('form.form').count()).toBe(0);
    await page.close();
  });

  it('tells a stale tab that the turn was already answered, and reloads the run there', async () => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const embedKey = await api.addKey(api.tenant, 'execute', [wf]);
    // two tabs of one visitor: one browser profile, so the run's token is in both
    const visitor = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const a = await newPage(visitor);
    // an execute key given once in the URL: moved to sessionStorage and out of the address bar
    await a.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(embedKey)}`);
    await a.getByText(`Form intake (${wf})`).waitFor();
    expect(a.url()).not.toContain('key=');
    expect(await a.evaluate('sessionStorage.getItem("easel.playground.key")')).toBe(embedKey);
    await a.getByLabel('Message').fill('sign me up');
    await a.getByLabel('Message').press('Enter');
    await a.locator('form.form').waitFor();
    const runId = await text(a, '#fact-run');

    // another visitor with the same key and the run's link reaches nothing of it
    const stranger = await newPage();
    await stranger.goto(`${api.url}/playground/${wf}?run=${runId}&key=${encodeURIComponent(embedKey)}`);
    await stranger.getByRole('alert').getByText('Could not reload the run').waitFor();
    expect(await stranger.getByText('sign me up', { exact: true }).count()).toBe(0);
    await stranger.close();

    // tab B opens the same run: it reads the run and shows the same form. Its clock stands
    // still, so it does not read the run again by itself (live.test.ts has that): it stays stale
    const b = await newPage(visitor);
    await b.clock.install();
    await b.clock.pauseAt(Date.now() + 1_000);
    await b.goto(`${api.url}/playground/${wf}?run=${runId}&key=${encodeURIComponent(embedKey)}`);
    await b.locator('form.form').waitFor();
    expect(await text(b, '#fact-turn')).toBe('1');
    await b.getByText('sign me up', { exact: true }).waitFor();

    // A answers
    const formA = a.locator('form.form');
    await formA.getByLabel('Full name').fill('Ada');
    await formA.getByLabel('Age').fill('36');
    await formA.getByLabel('Plan').selectOption('free');
    await formA.getByRole('button', { name: 'Submit' }).click();
    await a.getByText('Welcome Ada (36), plan free; city .').waitFor();
    await a.locator('#fact-status').filter({ hasText: 'completed' }).waitFor();

    // B, still showing turn 1's form, submits too
    const formB = b.locator('form.form');
    await formB.getByLabel('Full name').fill('Bob');
    await formB.getByLabel('Age').fill('40');
    await formB.getByLabel('Plan').selectOption('pro');
    await formB.getByRole('button', { name: 'Submit' }).click();
    const alert = b.getByRole('alert');
    await alert.getByText('This turn was already answered').waitFor();
    expect(await alert.textContent()).toContain('The run is now at turn 2 (completed)');
    // reloaded: A's answer and the final message are there, B's answer is marked as not sent
    await b.getByText('Welcome Ada (36), plan free; city .').waitFor();
    expect(await text(b, '#fact-status')).toBe('completed');
    expect(await text(b, '#fact-turn')).toBe('2');
    expect(await b.locator('form.form').count()).toBe(0);
    expect(await b.locator('.entry.failed').filter({ hasText: 'Bob' }).textContent()).toContain('not sent');
    // A's answers, read back, are named by the form's labels
    expect(await b.locator('.entry.user').filter({ hasText: 'Ada' }).last().textContent()).toContain('Full name');

    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(turns.json.items.map((t: { turn_number: number }) => t.turn_number)).toEqual([1, 2]);
    expect(turns.json.items[1].request.run_input.inputs.name).toBe('Ada');
    await visitor.close();
  });

  it('runs embedded in an iframe of an allowed origin, with an execute key given once', async () => {
    const host: Server = createServer();
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
    const hostOrigin = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
    const embedded = await serveApp(testEngine(), { frameAncestors: ["'self'", hostOrigin] });
    try {
      const wf = await createWorkflow('Form intake', fixture('form-intake'), embedded);
      const key = await embedded.addKey(embedded.tenant, 'execute', [wf]);
      host.on('request', (_req, res) => {
        res.setHeader('content-type', 'text/html');
        res.end(`<!doctype html><title>Host</title><h1>A partner site</h1><iframe title="Easel" src="${embedded.url}/playground/${wf}?key=${encodeURIComponent(key)}" width="900" height="600"></iframe>`);
      });
      const page = await newPage();
      await page.goto(`${hostOrigin}/`);
      const frame = page.frameLocator('iframe[title="Easel"]');
      await frame.getByText(`Form intake (${wf})`).waitFor();
      await frame.getByLabel('Message').fill('from the partner site');
      await frame.getByLabel('Message').press('Enter');
      await frame.getByText('Tell us about yourself (you said: from the partner site)').waitFor();
      // the key left the iframe's URL
      const inner = page.frames().find((f) => f.url().startsWith(embedded.url));
      expect(inner?.url()).not.toContain('key=');
      await page.close();
    } finally {
      host.close();
      await embedded.close();
    }
  });
});
