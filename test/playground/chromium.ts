/**
 * What the playground's browser suites share: Debian's Chromium through playwright-core, a page
 * per visitor whose script errors and Content-Security-Policy violations fail the test, the two
 * screen sizes the page is checked at, and the screenshots in docs/ (written when missing or
 * when EASEL_UPDATE_SCREENSHOTS is set, so test runs leave the tree clean).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterEach, expect } from 'vitest';
import type { Served } from '../helpers/http';

const CHROMIUM = '/usr/bin/chromium';

export const DESKTOP = { width: 1280, height: 800 } as const;
export const PHONE = { width: 390, height: 844 } as const;
export type Viewport = typeof DESKTOP | typeof PHONE;

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is not installed at ${CHROMIUM}: the browser tests need it. Install it with \`apt-get install -y --no-install-recommends chromium\` (.ci/run does so when it is missing).`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Uncaught errors of the pages' scripts and Content-Security-Policy violations, per test. */
const problems: string[] = [];

/** Registers the check that no page of the suite's tests broke its script or its policy. */
export function failOnPageProblems(): void {
  afterEach(() => {
    expect(problems.splice(0)).toEqual([]);
  });
}

/** A page in a browser profile of its own, or in `context` (tabs of one visitor). */
export async function newPage(browser: Browser, options: { context?: BrowserContext; viewport?: Viewport } = {}): Promise<Page> {
  const page = options.context ? await options.context.newPage() : await browser.newPage({ viewport: options.viewport ?? DESKTOP });
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
  });
  return page;
}

export const textOf = async (page: Page, selector: string) => ((await page.locator(selector).textContent()) ?? '').trim();

export async function createWorkflow(on: Served, name: string, dsl: unknown): Promise<string> {
  const res = await on.call('POST', '/workflows/v1/workflows', { body: { name, dsl } });
  expect(res.status).toBe(201);
  return res.json.id as string;
}

/** docs/<name>, taken now when it is missing or EASEL_UPDATE_SCREENSHOTS is set; checked to be a picture either way. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const path = fileURLToPath(new URL(`../../docs/${name}`, import.meta.url));
  mkdirSync(fileURLToPath(new URL('../../docs/', import.meta.url)), { recursive: true });
  const write = !existsSync(path) || Boolean(process.env.EASEL_UPDATE_SCREENSHOTS);
  const shot = await page.screenshot(write ? { path } : {});
  expect(shot.byteLength).toBeGreaterThan(1000);
}
