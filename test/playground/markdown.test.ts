/**
 * Model output in the playground, in a real headless Chromium: a model server speaking the
 * OpenAI protocol answers an Agent that searched a knowledge base with its Retrieval tool; the
 * answer is markdown with citations and with what a hostile model (or a poisoned document)
 * would write. The page renders the markdown (a heading, a list, a table, a link that opens
 * a new tab with `rel="noopener noreferrer"`), numbers the citations with their sources, lists
 * the tool call, and runs none of what the model wrote: its HTML is shown as text, no script,
 * handler or `javascript:` URL, style, image or form control reaches the page, and the page's
 * CSP is never even asked (a violation fails the test).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { townKnowledge } from '../helpers/knowledge';
import { OpenAiServer } from '../llm/openai-server';
import { createWorkflow, failOnPageProblems, launchChromium, newPage, PHONE } from './chromium';

const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';

let browser: Browser;
let model: OpenAiServer;
let api: Served;

beforeAll(async () => {
  [browser, model] = await Promise.all([launchChromium(), OpenAiServer.start()]);
  api = await serveApp(testEngine({ openaiUrl: model.url, knowledge: townKnowledge() }));
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await model?.close();
});

failOnPageProblems();

/** What the model answers once it has the tool's result: markdown, a citation, and attacks. */
const answer = (citation: string) => [
  '## The old bridge',
  '',
  `It opened in **1932** [ID:${citation}] and carries eight lanes.`,
  '',
  '- first item',
  '- second item with `code [ID:1]`',
  '',
  '| year | event |',
  '| --- | --- |',
  '| 1998 | painted red |',
  '',
  'See [the town site](https://town.example/bridge) or [this](javascript:window.__pwned=3). CO<sub>2</sub> free.',
  '',
  '<script>window.__pwned = 1</script>',
  '',
  'Inline <img src="x" onerror="window.__pwned = 2"> and <a href="https://town.example/x" onclick="window.__pwned = 4" style="color: red" class="alert">styled</a>.',
  '',
  '<iframe src="https://town.example/"></iframe><form action="https://town.example/"><input name="password"><button>Log in</button></form>',
  '',
  '![a map](https://town.example/map.png)',
].join('\n');

const dsl = graph({
  begin: ['Begin', { mode: 'conversational', prologue: 'Ask me about **the town**.' }, ['Agent:Helper']],
  'Agent:Helper': ['Agent', {
    llm_id: 'writer@Local',
    sys_prompt: 'You help with questions about the town.',
    prompts: [{ role: 'user', content: '{sys.query}' }],
    max_rounds: 3,
    tools: [{ component_name: 'Retrieval', name: 'Town facts', params: { description: 'Facts about the town.', kb_ids: [FACTS], similarity_threshold: 0.1, top_n: 4 } }],
  }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Helper@content}'] }],
});

describe('model output in the playground', () => {
  it('renders markdown with citations, sources and tool calls, and runs nothing the model wrote', async () => {
    model.enqueue({ kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'bridge opened' } }] });
    // the second round has the tool's knowledge: cite its first chunk
    model.respond = (body) => {
      const knowledge = body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join('\n');
      const id = /\nID: (\d+)/.exec(knowledge)?.[1] ?? 'none';
      return { kind: 'text', text: answer(id), chunks: 7 };
    };
    const wf = await createWorkflow(api, 'Town guide', dsl);
    const page = await newPage(browser, { viewport: PHONE });
    await page.goto(`${api.url}/playground/${wf}?key=${encodeURIComponent(api.adminKey)}`);
    // the prologue first, as markdown too
    const prologue = page.locator('.entry.prologue');
    await prologue.locator('strong').getByText('the town').waitFor();

    await page.getByLabel('Message').fill('When did the bridge open?');
    await page.getByLabel('Message').press('Enter');
    const reply = page.locator('.entry.assistant:not(.prologue)');
    await reply.locator('h2').getByText('The old bridge').waitFor();
    await page.locator('#fact-status').filter({ hasText: 'completed' }).waitFor({ state: 'attached' });

    expect(await reply.locator('.md li').allTextContents()).toEqual(['first item', 'second item with code [ID:1]']);
    expect(await reply.locator('.md strong').textContent()).toBe('1932');
    expect(await reply.locator('.md table td').allTextContents()).toEqual(['1998', 'painted red']);
    const link = reply.getByRole('link', { name: 'the town site' });
    expect(await link.getAttribute('href')).toBe('https://town.example/bridge');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(await link.getAttribute('target')).toBe('_blank');
    // an image is a link to it: the page loads nothing from elsewhere
    expect(await reply.getByRole('link', { name: 'a map' }).getAttribute('href')).toBe('https://town.example/map.png');

    // nothing the model wrote ran, or survived to run later: its HTML is shown as text
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    const md = reply.locator('.md');
    expect(await md.locator('script, img, iframe, form, input, button, style').count()).toBe(0);
    expect(await md.locator('[onerror], [onclick], [style], [class]:not(sup.cite)').count()).toBe(0);
    expect(await md.locator('a[href^="javascript"]').count()).toBe(0);
    expect(await md.getByText('this', { exact: true }).getAttribute('href')).toBeNull();
    const shown = (await md.textContent()) ?? '';
    expect(shown).toContain('<script>window.__pwned = 1</script>');
    expect(shown).toContain('<img src="x" onerror="window.__pwned = 2">');
    // bare formatting tags stay markup
    expect(await md.locator('sub').textContent()).toBe('2');

    // the citation is a numbered mark; its source is listed under the answer, found by the tool
    const mark = md.locator('sup.cite');
    expect(await mark.allTextContents()).toEqual(['1']);
    expect(await mark.getAttribute('title')).toMatch(/^bridge\.md: The old bridge opened in 1932/);
    expect(await md.textContent()).not.toMatch(/\[ID:\d+\] and carries/);
    // a marker inside code is quoted, not a citation
    expect(await md.locator('code').first().textContent()).toBe('code [ID:1]');
    const sources = reply.locator('details.sources');
    await sources.locator('summary').click();
    expect(await sources.locator('li').allTextContents()).toEqual([expect.stringMatching(/^bridge\.md The old bridge opened in 1932/)]);

    // the Agent's tool call, compactly: its name, arguments and what it found
    const tools = page.locator('.entry.tools');
    expect(await tools.locator('summary').textContent()).toBe('Agent:Helper called a tool: search_my_dateset_0');
    await tools.locator('summary').click();
    expect(await tools.locator('.tool-args').textContent()).toBe('{"query":"bridge opened"}');
    expect(await tools.locator('.tool-result').textContent()).toContain('bridge.md');

    // read back after a reload: the same rendering from the stored turn
    await page.reload();
    await page.locator('.entry.assistant:not(.prologue) h2').getByText('The old bridge').waitFor();
    expect(await page.locator('.entry.assistant:not(.prologue) sup.cite').allTextContents()).toEqual(['1']);
    expect(await page.locator('.entry.tools').count()).toBe(1);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    await page.close();
  });
});
