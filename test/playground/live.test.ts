/**
 * The playground keeps up with its run in a real headless Chromium, on a fake clock
 * (Playwright's `page.clock`) so nothing waits on the wall clock: a form's timer is counted
 * down, the timer is fired in the background through the pump route, the open page shows the
 * timer turn at its next poll (and not before) and keeps the overtaken form read-only; an
 * answer sent from another client shows up the same way; reads back off from 2 s to 30 s and
 * stop while the page is hidden. The run list reopens an older run
 * with its history and its pending form, for an admin key (the API's listing), a public key
 * (the runs whose tokens this browser holds) and a public key with an end-user token (that
 * user's listing).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { endUserToken, makeEmbedSecret } from '../helpers/end-users';
import { type Served, serveApp } from '../helpers/http';
import { createWorkflow, failOnPageProblems, launchChromium, newPage, PHONE, textOf } from './chromium';

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

/** A form that waits a minute, then goes on without an answer. */
const timed = graph({
  begin: ['Begin', { mode: 'task', prologue: 'Confirm your booking below.' }, ['UserFillUp:Confirm']],
  'UserFillUp:Confirm': [
    'UserFillUp',
    { tips: 'Confirm within a minute', inputs: { ok: { name: 'Confirmed', type: 'boolean', optional: false }, note: { name: 'Note', type: 'line', optional: true } }, timeout_seconds: 60, timeout_goto: ['Message:TooLate'] },
    ['Message:Thanks', 'Message:TooLate'],
  ],
  'Message:Thanks': ['Message', { content: ['Confirmed: {UserFillUp:Confirm@ok}'] }],
  'Message:TooLate': ['Message', { content: ['No answer in time (timed out: {UserFillUp:Confirm@timed_out})'] }],
});

/** Starts a run on the page and waits for its form; returns the run id. */
async function startRun(page: Page, query: string): Promise<string> {
  await page.getByLabel('Message').fill(query);
  await page.getByLabel('Message').press('Enter');
  await page.locator('form.form:not([disabled])').last().waitFor();
  await page.getByText(query, { exact: true }).waitFor();
  const runId = await textOf(page, '#fact-run');
  expect(runId).toMatch(/^[0-9a-f]{32}$/);
  return runId;
}

/**
 * The side panel's "Updates" line once a read has ended and the next is `seconds` away (it
 * names the time of the read, so it differs from `before`): only then may the test move the
 * clock again, or the next read would be set after the move.
 */
async function readDone(page: Page, before: string, seconds: number): Promise<string> {
  const live = page.locator('#fact-live');
  const pattern = new RegExp(`^read at .+, next read in ${seconds} s$`);
  await expect.poll(async () => {
    const text = (await live.textContent()) ?? '';
    return text !== before && pattern.test(text);
  }).toBe(true);
  return (await live.textContent()) ?? '';
}

/** How many times the page has read this run's state. */
const reads = (requests: string[], runId: string) => requests.filter((u) => u.endsWith(`/workflows/v1/workflow-runs/${runId}`)).length;

describe('live updates', () => {
  it('counts a timer down, and shows the timer turn fired through the pump route at its next poll, the form read-only', async () => {
    const wf = await createWorkflow(api, 'Booking', timed);
    const page = await newPage(browser, { viewport: PHONE });
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    // the page's clock stands still unless the test moves it
    await page.clock.install();
    await page.clock.pauseAt(Date.now() + 1_000);
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    await page.locator('.entry.prologue').getByText('Confirm your booking below.').waitFor();
    const runId = await startRun(page, 'book the 9:40');

    // the answer says a timer is armed; the run's description says when it fires: the page reads it at once
    const countdown = page.locator('form.form .countdown');
    await countdown.waitFor();
    const first = (await countdown.textContent()) ?? '';
    expect(first).toMatch(/^Time left to answer: [01]:\d\d$/);
    const seconds = (text: string) => {
      const [, m, s] = /(\d+):(\d\d)$/.exec(text) ?? [];
      return Number(m) * 60 + Number(s);
    };
    // that read found nothing new: the next is 4 s later
    let live = await readDone(page, '', 4);
    await page.clock.runFor(10_000);
    expect(seconds((await countdown.textContent()) ?? '')).toBe(seconds(first) - 10);
    expect(await page.locator('#fact-timer').textContent()).toMatch(/^fires in 0:\d\d$/);
    // a read 4 s in found nothing new either: the next one is 8 s after it
    live = await readDone(page, live, 8);

    // the timer fires in the background, through the pump route, not by waiting
    const fired = await api.call('POST', `/workflows/v1/workflows/${wf}/runs/${runId}/pump-companions`);
    expect(fired.json).toMatchObject({ status: 'completed', turn_number: 2 });
    // the page does not know yet: it has not read the run since
    const before = reads(requests, runId);
    expect(await page.getByText('No answer in time').count()).toBe(0);
    expect(await page.locator('form.form').getByLabel('Confirmed').isDisabled()).toBe(false);

    // its next poll (2 s after the last, doubling up to 30 s while nothing moves) sees turn 2
    await page.clock.runFor(8_000);
    await page.getByText('No answer in time (timed out: true)').waitFor();
    expect(reads(requests, runId)).toBeGreaterThan(before);
    const form = page.locator('form.form');
    expect(await form.count()).toBe(1);
    expect(await form.locator('fieldset').getAttribute('disabled')).toBe('');
    expect(await form.getByLabel('Confirmed').isDisabled()).toBe(true);
    await form.getByText('Timed out: no answer came in time').waitFor();
    expect(await form.locator('.countdown').count()).toBe(0);
    await page.locator('#fact-status').filter({ hasText: 'completed' }).waitFor({ state: 'attached' });
    expect(await textOf(page, '#fact-turn')).toBe('2');
    // the run is finished (a Begin in task mode): nothing more to read
    await page.locator('#fact-live').filter({ hasText: 'off: the run has ended' }).waitFor({ state: 'attached' });
    expect(live).not.toBe('off: the run has ended');
    const settled = reads(requests, runId);
    await page.clock.runFor(120_000);
    expect(reads(requests, runId)).toBe(settled);
    await page.close();
  });

  it('backs off while nothing moves, reads nothing while hidden, and shows an answer sent by another client at the next poll', async () => {
    const wf = await createWorkflow(api, 'Form intake', fixture('form-intake'));
    const page = await newPage(browser);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.clock.install();
    await page.clock.pauseAt(Date.now() + 1_000);
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    const runId = await startRun(page, 'sign me up');
    await page.getByLabel('Full name').fill('typed here');

    // nothing moves: reads come 2, 4, 8, 16, 30, 30 s apart
    const live = page.locator('#fact-live');
    await live.filter({ hasText: /^next read in 2 s$/ }).waitFor();
    let shown = (await live.textContent()) ?? '';
    for (const [gap, next] of [[2, 4], [4, 8], [8, 16], [16, 30], [30, 30], [30, 30]] as const) {
      const count = reads(requests, runId);
      await page.clock.runFor(gap * 1000 - 1);
      expect(await live.textContent()).toBe(shown);
      await page.clock.runFor(1);
      shown = await readDone(page, shown, next);
      expect(reads(requests, runId)).toBe(count + 1);
    }

    // a hidden page reads nothing; shown again, it reads at once
    const visibility = (state: 'hidden' | 'visible') => page.evaluate(`(() => {
      Object.defineProperty(document, 'visibilityState', { value: '${state}', configurable: true });
      document.dispatchEvent(new Event('visibilitychange'));
    })()`);
    await visibility('hidden');
    expect(await live.textContent()).toBe('paused while the page is hidden');
    const hidden = reads(requests, runId);
    await page.clock.runFor(120_000);
    expect(reads(requests, runId)).toBe(hidden);
    await visibility('visible');
    shown = await readDone(page, shown, 4);
    expect(reads(requests, runId)).toBe(hidden + 1);

    const answered = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { name: 'Grace', age: 45, plan: 'free' } } } });
    expect(answered.json.status).toBe('completed');
    await page.clock.runFor(30_000);
    await page.getByText('Welcome Grace (45), plan free; city .').waitFor();
    const form = page.locator('form.form');
    expect(await form.locator('fieldset').getAttribute('disabled')).toBe('');
    expect(await form.getByRole('button', { name: 'Submit' }).isDisabled()).toBe(true);
    await form.getByText('Answered elsewhere').waitFor();
    // what was typed here stays visible, read-only; the answer that counted is shown by its labels
    expect(await form.getByLabel('Full name').inputValue()).toBe('typed here');
    expect(await page.locator('.entry.user').filter({ hasText: 'Grace' }).textContent()).toContain('Full name');

    // a conversational run goes on being read; deleted, it is said so, and reading stops
    await readDone(page, shown, 2);
    expect((await api.call('DELETE', `/workflows/v1/workflow-runs/${runId}`)).status).toBe(204);
    await page.clock.runFor(2_000);
    await page.getByText('This run no longer exists').waitFor();
    await page.locator('#fact-live').filter({ hasText: 'off: the run has ended' }).waitFor();
    await page.close();
  });
});

describe('the run list', () => {
  it('reopens an older run with its history and pending form (admin key: the API listing)', async () => {
    const wf = await createWorkflow(api, 'Form intake', fixture('form-intake'));
    const page = await newPage(browser);
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    const older = await startRun(page, 'the first request');
    await page.getByRole('button', { name: 'New run' }).click();
    const newer = await startRun(page, 'the second request');
    expect(newer).not.toBe(older);

    const list = page.locator('#runs');
    await list.locator('button.run-item').nth(1).waitFor();
    expect(await page.locator('#runs-note').textContent()).toBe('Runs of this workflow, newest first.');
    const titles = await list.locator('button.run-item').evaluateAll((buttons) => buttons.map((b) => [b.getAttribute('title'), b.getAttribute('aria-current')]));
    expect(titles).toEqual([[newer, 'true'], [older, null]]);

    await list.locator(`button.run-item[title="${older}"]`).click();
    await page.getByText('the first request', { exact: true }).waitFor();
    expect(await page.getByText('the second request', { exact: true }).count()).toBe(0);
    expect(await textOf(page, '#fact-run')).toBe(older);
    expect(page.url()).toContain(`run=${older}`);
    // its history, the prologue first, and its form, ready to answer
    expect(await page.locator('#transcript > li').first().textContent()).toContain("Hello! Let's get you registered.");
    const form = page.locator('form.form');
    await form.getByText('Tell us about yourself (you said: the first request)').waitFor();
    expect(await list.locator(`button.run-item[title="${older}"]`).getAttribute('aria-current')).toBe('true');
    await form.getByLabel('Full name').fill('Ada');
    await form.getByLabel('Age').fill('36');
    await form.getByLabel('Plan').selectOption('free');
    await form.getByRole('button', { name: 'Submit' }).click();
    await page.getByText('Welcome Ada (36), plan free; city .').waitFor();
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${older}`)).json).toMatchObject({ status: 'completed', turn_number: 2 });
    // its row says so, without listing again
    expect(await list.locator(`button.run-item[title="${older}"]`).textContent()).toMatch(/^completedturn 2/);
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${newer}`)).json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    await page.close();
  });

  it('lists, for a public key, the runs whose tokens this browser holds, and nobody else’s', async () => {
    const wf = await createWorkflow(api, 'Form intake', fixture('form-intake'));
    const key = await api.addKey(api.tenant, 'execute', [wf]);
    // a run of someone else, started with the same key
    const other = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, body: { run_input: { query: 'not yours' } } });
    expect(other.status).toBe(200);
    const visitor = await browser.newContext({ viewport: PHONE });
    const page = await newPage(browser, { context: visitor });
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(key)}`);
    const older = await startRun(page, 'my first visit');
    await page.getByRole('button', { name: 'New run' }).click();
    const newer = await startRun(page, 'my second visit');

    await page.getByRole('button', { name: 'Run details' }).click();
    const list = page.locator('#runs');
    await list.locator('button.run-item').nth(1).waitFor();
    expect(await page.locator('#runs-note').textContent()).toBe('Runs started in this browser, newest first.');
    expect(await list.locator('button.run-item').evaluateAll((buttons) => buttons.map((b) => b.getAttribute('title')))).toEqual([newer, older]);
    await list.locator(`button.run-item[title="${older}"]`).click();
    // the panel folds away again, and the older run is on screen
    await page.locator('#side').waitFor({ state: 'hidden' });
    await page.getByText('my first visit', { exact: true }).waitFor();
    await page.locator('form.form').getByText('Tell us about yourself (you said: my first visit)').waitFor();

    // another browser with the same key holds no token: it lists nothing
    const stranger = await newPage(browser);
    await stranger.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(key)}`);
    await stranger.locator('#runs-note').filter({ hasText: 'Runs started in this browser: none yet.' }).waitFor();
    await stranger.close();
    await visitor.close();
  });

  it('lists, for a public key with an end-user token, that user’s runs from the API', async () => {
    const wf = await createWorkflow(api, 'Form intake', fixture('form-intake'));
    const key = await api.addKey(api.tenant, 'execute', [wf]);
    const embed = await makeEmbedSecret(api.call, api.adminKey);
    const ada = endUserToken(embed, { sub: 'ada', workflows: [wf] });
    // Ada's run from another device, and Bob's run
    const elsewhere = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, headers: { 'easel-end-user-token': ada }, body: { run_input: { query: 'from my phone' } } });
    const bob = endUserToken(embed, { sub: 'bob', workflows: [wf] });
    await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { key, headers: { 'easel-end-user-token': bob }, body: { run_input: { query: 'bob here' } } });

    const page = await newPage(browser);
    const sent: Record<string, string>[] = [];
    page.on('request', (r) => {
      if (r.url().includes('/workflows/v1/')) sent.push(r.headers());
    });
    // the token in the fragment, which browsers never send; taken once, out of the address bar
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(key)}#user_token=${ada}`);
    const list = page.locator('#runs');
    await list.locator('button.run-item').first().waitFor();
    expect(page.url()).not.toContain('user_token');
    expect(await page.locator('#runs-note').textContent()).toBe("This user's runs, newest first.");
    expect(await list.locator('button.run-item').evaluateAll((buttons) => buttons.map((b) => b.getAttribute('title')))).toEqual([elsewhere.json.run_id]);
    await list.locator('button.run-item').first().click();
    await page.getByText('from my phone', { exact: true }).waitFor();
    await page.locator('form.form').getByText('Tell us about yourself (you said: from my phone)').waitFor();
    // the page sent the token as a header with every call, and never in a URL
    expect(sent.length).toBeGreaterThan(2);
    expect(sent.every((headers) => headers['easel-end-user-token'] === ada)).toBe(true);
    await page.close();
  });
});
