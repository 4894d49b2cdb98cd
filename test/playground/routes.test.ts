/**
 * The playground's HTTP side without a browser: the page and its assets are served without a
 * key, with the configured frame-ancestors; CORS answers preflights before authentication and
 * only for the configured origins; the two settings are parsed and checked by readConfig.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, readConfig } from '../../lib/config';
import { bundleMarkdown, GENERATED_PATH, MODULES, renderAssets } from '../../lib/http/playground/build';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

const APP_ORIGIN = 'https://app.example.com';
let plain: Served;
let open: Served;
beforeAll(async () => {
  const engine = testEngine();
  [plain, open] = await Promise.all([
    serveApp(engine),
    serveApp(engine, { corsOrigins: [APP_ORIGIN, 'http://localhost:5173'], frameAncestors: ["'self'", 'https://*.example.com'] }),
  ]);
});
afterAll(async () => {
  await Promise.all([plain.close(), open.close()]);
});

describe('the playground page', () => {
  it('is served without a key, with a strict CSP whose frame-ancestors default to self', async () => {
    const res = await plain.call('GET', '/playground', { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("frame-ancestors 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    // assets are addressed relative to the page, versioned by content
    expect(res.text).toMatch(/<script type="module" src="playground\/assets\/app\.js\?v=[0-9a-f]{12}"><\/script>/);
    expect(res.text).toMatch(/href="playground\/assets\/app\.css\?v=[0-9a-f]{12}"/);

    const one = await plain.call('GET', '/playground/ex-form-intake', { key: null });
    expect(one.status).toBe(200);
    expect(one.text).toMatch(/src="assets\/app\.js\?v=/);
    expect((await plain.call('GET', '/playground/', { key: null })).status).toBe(200);
    expect((await plain.call('GET', '/playground/not.a.workflow', { key: null })).status).toBe(404);
  });

  it('serves its modules and stylesheet without a key, cacheable for good when versioned', async () => {
    const js = await plain.call('GET', '/playground/assets/app.js?v=1', { key: null });
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toContain('immutable');
    // what it imports is addressed by content hash too, so a versioned page pins every module
    const imports = [...js.text.matchAll(/from '\.\/([a-z-]+\.js)\?v=([0-9a-f]{12})';/g)].map((m) => m[1]);
    expect(imports.sort()).toEqual(['api.js', 'fields.js', 'form-view.js', 'live.js', 'run-list.js', 'transcript.js']);
    expect(js.text).not.toMatch(/from '\.\/[a-z-]+\.js';/);
    for (const name of MODULES) {
      const module = await plain.call('GET', `/playground/assets/${name}`, { key: null });
      expect(module.status, name).toBe(200);
      expect(module.headers.get('cache-control'), name).toBe('no-cache');
    }
    expect((await plain.call('GET', '/playground/assets/nothing.js', { key: null })).status).toBe(404);
    const css = await plain.call('GET', '/playground/assets/app.css', { key: null });
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(css.headers.get('cache-control')).toBe('no-cache');
  });

  it('is where the server root leads, and has a tab icon', async () => {
    const root = await fetch(`${plain.url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/playground');
    const icon = await plain.call('GET', '/favicon.ico', { key: null });
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');
    expect(icon.text).toMatch(/^<svg /);
  });

  it('uses the configured frame-ancestors', async () => {
    const res = await open.call('GET', '/playground/wf1', { key: null });
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'self' https://*.example.com");
  });
});

describe('CORS', () => {
  it('answers a preflight for a configured origin before authentication', async () => {
    const res = await open.call('OPTIONS', '/workflows/v1/workflows/wf1/execute', {
      key: null,
      headers: { origin: APP_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-headers')).toContain('authorization');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('lets a configured origin read answers, errors included, and nobody else', async () => {
    const ok = await open.call('GET', '/workflows/v1/workflows', { headers: { origin: APP_ORIGIN } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(ok.headers.get('vary')).toContain('Origin');
    const refused = await open.call('GET', '/workflows/v1/workflows', { key: null, headers: { origin: APP_ORIGIN } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    const ragflow = await open.call('OPTIONS', '/api/v1/agents', { key: null, headers: { origin: APP_ORIGIN, 'access-control-request-method': 'GET' } });
    expect(ragflow.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);

    const other = await open.call('GET', '/workflows/v1/workflows', { headers: { origin: 'https://evil.example.net' } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    // nothing configured: same origin only, and a preflight meets authentication
    const none = await plain.call('OPTIONS', '/workflows/v1/workflows', { key: null, headers: { origin: APP_ORIGIN, 'access-control-request-method': 'GET' } });
    expect(none.headers.get('access-control-allow-origin')).toBeNull();
    expect(none.status).toBe(401);
  });
});

describe('EASEL_CORS_ORIGINS and EASEL_FRAME_ANCESTORS', () => {
  it('default to no origin and self', () => {
    const config = readConfig({});
    expect(config.http.corsOrigins).toEqual([]);
    expect(config.http.frameAncestors).toEqual(["'self'"]);
  });

  it('are comma lists, normalized', () => {
    const config = readConfig({
      EASEL_CORS_ORIGINS: ' https://app.example.com/ , http://localhost:5173',
      EASEL_FRAME_ANCESTORS: "self, https://*.example.com, https://partner.example.org:8443",
    });
    expect(config.http.corsOrigins).toEqual(['https://app.example.com', 'http://localhost:5173']);
    expect(config.http.frameAncestors).toEqual(["'self'", 'https://*.example.com', 'https://partner.example.org:8443']);
    expect(readConfig({ EASEL_CORS_ORIGINS: '*' }).http.corsOrigins).toEqual(['*']);
  });

  it('refuse what is not an origin or a CSP source, naming the variable', () => {
    let error: unknown;
    try {
      readConfig({ EASEL_CORS_ORIGINS: 'https://app.example.com/path', EASEL_FRAME_ANCESTORS: "'none', https://x.example.com; script-src *" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toContain('EASEL_CORS_ORIGINS: "https://app.example.com/path" is not an origin');
    expect(problems).toContain('EASEL_FRAME_ANCESTORS: "https://x.example.com; script-src *" is not a CSP source');
    expect(problems).toContain("'none' cannot be combined");
  });
});

describe('the page sources', () => {
  it('are embedded up to date (npm run build:playground regenerates them)', () => {
    expect(readFileSync(GENERATED_PATH, 'utf8'), 'lib/http/playground/assets.generated.ts is stale: run `npm run build:playground`').toBe(renderAssets());
  });

  it('bundle marked and DOMPurify into markdown.js: one module that imports nothing', () => {
    const markdown = bundleMarkdown();
    expect(markdown).not.toMatch(/\bimport\s*[{("'*]|\bfrom\s*["']/);
    expect(markdown).toContain('DOMPurify');
    // the libraries' licences travel with their code
    expect(markdown).toMatch(/@license DOMPurify/);
    expect(markdown).toMatch(/^\/\*!\n \* marked v\d+\.\d+\.\d+ - a markdown parser\n \* Copyright/);
    expect(markdown.length).toBeLessThan(120_000);
  });

  it('type-check: the modules against the DOM types (lib/http/playground/tsconfig.json)', () => {
    const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
    const project = fileURLToPath(new URL('../../lib/http/playground/tsconfig.json', import.meta.url));
    const result = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
