/**
 * The playground: a page served by the app itself (`GET /playground`, `GET /playground/{id}`
 * for one workflow, embeddable in an iframe; `GET /` leads there, `/favicon.ico` is its icon) that talks to the native API with the key the
 * user enters. The page and its assets need no key; every API call it makes carries one.
 * Also CORS for browsers on other origins (EASEL_CORS_ORIGINS) and the page's CSP
 * `frame-ancestors` (EASEL_FRAME_ANCESTORS).
 *
 * Also the hosted form page of form links (`GET /playground/form`, routes/form-links.ts).
 *
 * The pages are plain HTML + hand-written ES modules + one stylesheet (page.html and app.js,
 * form.html and form.js, fields.js which both render forms with, markdown.js which the
 * playground renders model output with, bundled with marked and DOMPurify, app.css, beside
 * this file), embedded in assets.generated.ts by `npm run build:playground` so
 * that every deployment (Lambda packages included) serves them without a file system. That
 * module is imported on the first request for a page, a chunk of its own in the packages.
 */
import type { Context } from 'hono';
import { cors } from 'hono/cors';
import type { App, AppDeps } from '../app';

type Assets = typeof import('./assets.generated').PLAYGROUND_ASSETS;
// loaded on the first playground request: no API request pays for parsing the page's assets
let assets: Promise<Assets> | undefined;
const loadAssets = () => (assets ??= import('./assets.generated').then((m) => m.PLAYGROUND_ASSETS));

/** Request headers a browser may send cross-origin to the API. */
const CORS_ALLOW_HEADERS = ['authorization', 'content-type', 'accept', 'idempotency-key', 'prefer', 'last-event-id', 'easel-run-token', 'easel-end-user-token'];
const CORS_EXPOSE_HEADERS = ['retry-after', 'easel-run-token', 'location'];
const WORKFLOW_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** The tab icon: an easel, as SVG (browsers take SVG at /favicon.ico by its content type). */
const FAVICON = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="7" y="4" width="18" height="14" rx="2" fill="#2f6fdb"/><path d="M16 18v10M10 28l4-10M22 28l-4-10" stroke="#444" stroke-width="2.5" stroke-linecap="round"/></svg>';

/** The page's own policy: it loads only its two assets and talks only to its own origin. */
export function pageCsp(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${(frameAncestors.length > 0 ? frameAncestors : ["'self'"]).join(' ')}`,
  ].join('; ');
}

export function registerPlayground(app: App, deps: Pick<AppDeps, 'corsOrigins' | 'frameAncestors'>): void {
  const origins = deps.corsOrigins ?? [];
  if (origins.length > 0) {
    const policy = cors({
      origin: origins.includes('*') ? '*' : [...origins],
      allowMethods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
      allowHeaders: CORS_ALLOW_HEADERS,
      exposeHeaders: CORS_EXPOSE_HEADERS,
      maxAge: 600,
    });
    // before authentication: a preflight carries no key
    app.use('/workflows/v1/*', policy);
    app.use('/api/v1/*', policy);
  }

  const csp = pageCsp(deps.frameAncestors ?? ["'self'"]);
  /** `assetsPath` is the assets' path relative to the page, so the app may live under a prefix. */
  const page = async (c: Context, assetsPath: string, html?: string) =>
    c.body((html ?? (await loadAssets()).html).replaceAll('%ASSETS%', assetsPath), 200, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': csp,
      'cache-control': 'no-cache',
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
    });
  const asset = (c: Context, body: string, type: string) =>
    c.body(body, 200, {
      'content-type': type,
      // the page asks for them with ?v=<content hash>
      'cache-control': c.req.query('v') ? 'public, max-age=31536000, immutable' : 'no-cache',
      'x-content-type-options': 'nosniff',
    });

  // the pages' modules: app.js, form.js and what they import (build.ts MODULES)
  app.get('/playground/assets/:name{[a-z-]+\\.js}', async (c) => {
    const { scripts } = await loadAssets();
    const name = c.req.param('name');
    const script = Object.hasOwn(scripts, name) ? scripts[name] : undefined;
    if (script === undefined) return c.json({ code: 'not_found', error: 'no such route' }, 404);
    return asset(c, script, 'text/javascript; charset=utf-8');
  });
  app.get('/playground/assets/app.css', async (c) => asset(c, (await loadAssets()).css, 'text/css; charset=utf-8'));
  // a form link's page: the token is in the fragment, which never reaches the server
  app.get('/playground/form', async (c) => page(c, 'assets/', (await loadAssets()).formHtml));
  // document base "/" for /playground, "/playground/" below it
  app.get('/playground', (c) => page(c, 'playground/assets/'));
  // a browser opening the server's root gets the playground, and its tab an icon
  app.get('/', (c) => c.redirect('/playground', 302));
  app.get('/favicon.ico', (c) =>
    c.body(FAVICON, 200, { 'content-type': 'image/svg+xml', 'cache-control': 'public, max-age=86400', 'x-content-type-options': 'nosniff' }),
  );
  app.get('/playground/', (c) => page(c, 'assets/'));
  app.get('/playground/:workflow_id', (c) => {
    if (!WORKFLOW_ID.test(c.req.param('workflow_id'))) return c.json({ code: 'not_found', error: 'no such route' }, 404);
    return page(c, 'assets/');
  });
}
