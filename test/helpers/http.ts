/**
 * The app served for tests: a real Node HTTP server on 127.0.0.1 (as `npm start` serves it),
 * with an admin key for a fresh tenant. Requests go through `fetch`.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { createApp, type AppDeps } from '../../lib/http/app';
import { type AccessTokens, accessTokens } from '../../lib/http/access';
import { createAuthenticator } from '../../lib/http/auth';
import { EmbedSecrets } from '../../lib/secrets/embed-secrets';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { serverKey } from '../../lib/secrets/server-keys';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { closeUnreadBodies } from '../../lib/local/close-unread-bodies';
import { createKnowledge } from '../../lib/knowledge/service';
import { DEFAULT_RETRY } from '../../lib/llm';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import type { TurnEngine } from '../../lib/turns/execute';
import { newTenant } from './engine';

export interface Served {
  url: string;
  tenant: string;
  adminKey: string;
  engine: TurnEngine;
  /** Registers another key of `tenant` and returns its secret. */
  addKey(tenant: string, scope: 'admin' | 'execute', workflowIds?: string[]): Promise<string>;
  call(method: string, path: string, options?: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; text: string; json: any }>;
  close(): Promise<void>;
}

/**
 * What public keys need, on a master key ring of the test's own (as appDeps wires it from the
 * runtime): tenant secrets, embed secrets, run and file tokens, and an authenticator using them.
 */
export function accessDeps(engine: TurnEngine, options: { secrets?: TenantSecrets; now?: () => number; cacheMs?: number } = {}) {
  const now = options.now ?? Date.now;
  const secrets = options.secrets ?? new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()), now });
  const master = secrets.master;
  const access: AccessTokens = accessTokens((purpose) => serverKey(master, purpose), now);
  const embedSecrets = new EmbedSecrets(secrets, { now, cacheMs: options.cacheMs ?? 0 });
  const auth = createAuthenticator(engine.store, { cacheMs: options.cacheMs ?? 0, now, runTokens: access.runTokens, embedSecrets });
  return { secrets, access, embedSecrets, auth };
}

/** The knowledge service on the engine's store, as the runtime builds it (full-text search: no embedding model is configured). */
export function testKnowledge(engine: TurnEngine, secrets: Record<string, string> = {}) {
  return createKnowledge({
    store: engine.store,
    guard: new SsrfGuard({ allow: [] }),
    secretsFor: () => (name) => secrets[name],
    llm: { defaultModel: 'echo', models: {}, timeoutMs: 60_000, retry: { ...DEFAULT_RETRY, baseDelayMs: 5, maxDelayMs: 20 } },
  });
}

export async function serveApp(engine: TurnEngine, overrides: Partial<AppDeps> = {}): Promise<Served> {
  const { access, embedSecrets, auth } = accessDeps(engine, overrides.secrets ? { secrets: overrides.secrets } : {});
  const knowledge = overrides.knowledge ?? testKnowledge(engine);
  // as the runtime wires it: each run searches its own tenant's knowledge bases, the ones the routes manage
  // (unless the test gave its runs knowledge of its own)
  if (!engine.servicesFor && !(engine.services as { knowledge?: unknown }).knowledge) {
    engine.servicesFor = (tenant) => ({ ...engine.services, knowledge: knowledge.forTenant(tenant) });
  }
  const app = createApp({ engine, access, embedSecrets, auth, ...overrides, knowledge });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: closeUnreadBodies(app.fetch), port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const addKey = async (tenant: string, scope: 'admin' | 'execute', workflowIds: string[] = []) => {
    const secret = `test-${scope}-${randomBytes(16).toString('hex')}`;
    await putApiKey(engine.store, { tenant, id: randomBytes(8).toString('hex'), name: scope, scope, workflowIds, createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
    return secret;
  };
  const tenant = newTenant();
  const adminKey = await addKey(tenant, 'admin');
  return {
    url,
    tenant,
    adminKey,
    engine,
    addKey,
    async call(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const key = options.key === undefined ? adminKey : options.key;
      if (key) headers.authorization = `Bearer ${key}`;
      let body: string | undefined = options.raw;
      if (options.body !== undefined) {
        body = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      if (options.raw !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(`${url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
      const text = await res.text();
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, text, json };
    },
    async close() {
      server.close();
    },
  };
}

/** Parses an SSE body into its frames. */
export function sseFrames(text: string): { event: string; data: any }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1] ?? '';
      let parsed: unknown = data;
      try {
        parsed = JSON.parse(data);
      } catch {
        // not JSON
      }
      return { event, data: parsed };
    });
}
