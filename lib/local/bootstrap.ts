/**
 * What `npm start` does to a table before it serves: register the local admin key and load the
 * example workflows. Both are idempotent, so a restart against the same DynamoDB changes
 * nothing (and two servers starting at once on one table do not duplicate anything).
 *
 * @example
 * const key = await registerLocalKey(store, process.env.EASEL_API_KEY);
 * const loaded = await loadExamples(store, builtinComponents, await readExamples());
 */
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileWorkflow } from '../canvas';
import type { ComponentRegistry } from '../canvas/component';
import { EaselError } from '../errors';
import { findApiKey, hashSecret, putApiKey } from '../store/api-keys';
import { ConditionFailed, type StoreContext } from '../store/dynamo';
import { NotFoundError } from '../store/errors';
import { ensureWebhook } from '../store/webhooks';
import { addVersion, createWorkflow, getVersion, getWorkflow } from '../store/workflows';
import { webhookBegins } from '../webhooks/credentials';

/** The one tenant of a local server; the same across restarts. */
export const LOCAL_TENANT = 'local';
/** Shortest EASEL_API_KEY accepted (the authenticator reads 16 to 512 non-blank characters). */
export const MIN_KEY_LENGTH = 16;
export const MAX_KEY_LENGTH = 512;

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const EXAMPLES_DIR = join(REPO_ROOT, 'examples');
/** Where `npm start` keeps DynamoDB Local's data (git-ignored). */
export const LOCAL_DATA_DIR = join(REPO_ROOT, '.easel', 'dynamodb');

export class LocalSetupError extends EaselError {
  constructor(message: string) {
    super('local_setup', message);
  }
}

/** Why `secret` cannot be an API key, or undefined when it can. */
export function apiKeyProblem(secret: string): string | undefined {
  if (secret.length < MIN_KEY_LENGTH) return `EASEL_API_KEY must be at least ${MIN_KEY_LENGTH} characters long (it has ${secret.length})`;
  if (secret.length > MAX_KEY_LENGTH) return `EASEL_API_KEY must be at most ${MAX_KEY_LENGTH} characters long`;
  if (/\s/.test(secret)) return 'EASEL_API_KEY must not contain spaces or other blanks';
  return undefined;
}

/** The id of the local key made from `secret`: stable, in the format of generated key ids. */
export function localKeyId(secret: string): string {
  return hashSecret(`easel-local-key:${secret}`).slice(0, 16);
}

/**
 * Registers `secret` as an admin key of the local tenant, unless it already is one. Refuses a
 * key that was revoked or that belongs to something else, saying so.
 */
export async function registerLocalKey(
  store: StoreContext,
  secret: string,
  name = 'local admin (EASEL_API_KEY)',
): Promise<{ id: string; created: boolean }> {
  const problem = apiKeyProblem(secret);
  if (problem) throw new LocalSetupError(problem);
  const id = localKeyId(secret);
  const created = await putApiKey(store, {
    tenant: LOCAL_TENANT,
    id,
    name,
    scope: 'admin',
    workflowIds: [],
    createdAt: new Date((store.now ?? Date.now)()).toISOString(),
    secretHash: hashSecret(secret),
  });
  if (created) return { id, created };
  const existing = await findApiKey(store, secret);
  if (!existing) throw new LocalSetupError('EASEL_API_KEY names a key that was revoked: choose another value');
  if (existing.tenant !== LOCAL_TENANT || existing.scope !== 'admin') {
    throw new LocalSetupError(`EASEL_API_KEY is already a ${existing.scope} key of tenant "${existing.tenant}": choose another value`);
  }
  return { id: existing.id, created: false };
}

export interface ExampleWorkflow {
  /** Stable id (`ex-...`), used as the workflow id. */
  id: string;
  name: string;
  description: string;
  dsl: Record<string, unknown>;
}

/** The example files of `dir` (default `examples/`), sorted by id, each checked for shape. */
export async function readExamples(dir = EXAMPLES_DIR): Promise<ExampleWorkflow[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();
  const out: ExampleWorkflow[] = [];
  for (const file of files) {
    const path = join(dir, file);
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(path, 'utf8'));
    } catch (error) {
      throw new LocalSetupError(`${path} is not valid JSON: ${(error as Error).message}`);
    }
    const e = parsed as Partial<ExampleWorkflow>;
    if (typeof e.id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(e.id) || typeof e.name !== 'string' || typeof e.dsl !== 'object' || e.dsl === null) {
      throw new LocalSetupError(`${path} must be {"id": "<1-64 of A-Z a-z 0-9 _ ->", "name", "description", "dsl": {...}}`);
    }
    out.push({ id: e.id, name: e.name, description: typeof e.description === 'string' ? e.description : '', dsl: e.dsl });
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

export type ExampleAction = 'created' | 'updated' | 'unchanged' | 'deleted';

/**
 * Stores each example under the local tenant with its own id: created when missing; when its
 * active version's DSL differs from the file, a new version is added and activated. A workflow
 * deleted through the API stays deleted. Every DSL is compiled first: nothing is stored when
 * one is invalid.
 */
export async function loadExamples(
  store: StoreContext,
  registry: ComponentRegistry,
  examples: readonly ExampleWorkflow[],
): Promise<{ id: string; name: string; action: ExampleAction }[]> {
  for (const e of examples) {
    try {
      compileWorkflow(e.dsl, registry);
    } catch (error) {
      throw new LocalSetupError(`example ${e.id} is not a valid workflow: ${(error as Error).message}`);
    }
    // an example is stored as its file says: a webhook credential would stay in the DSL
    if (webhookBegins(e.dsl).some((b) => JSON.stringify(b.params.security ?? {}).match(/"(token_value|password|secret|token_ref|password_ref|secret_ref)"/))) {
      throw new LocalSetupError(`example ${e.id} carries a webhook credential: an example webhook may only be anonymous (security.allow_anonymous); import one with credentials through the API`);
    }
  }
  const out: { id: string; name: string; action: ExampleAction }[] = [];
  for (const e of examples) {
    const action = await loadExample(store, e);
    if (action !== 'deleted' && webhookBegins(e.dsl).length > 0) await ensureWebhook(store, LOCAL_TENANT, e.id);
    out.push({ id: e.id, name: e.name, action });
  }
  return out;
}

async function loadExample(store: StoreContext, e: ExampleWorkflow): Promise<ExampleAction> {
  for (;;) {
    let current;
    try {
      current = await getWorkflow(store, LOCAL_TENANT, e.id);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
      try {
        await createWorkflow(store, { tenant: LOCAL_TENANT, id: e.id, name: e.name, description: e.description, dsl: e.dsl });
        return 'created';
      } catch (raced) {
        if (raced instanceof ConditionFailed) continue; // another server created it just now
        throw raced;
      }
    }
    if (current.deleted) return 'deleted';
    const stored = await getVersion(store, LOCAL_TENANT, e.id, current.activeVersion);
    if (canonicalJson(stored) === canonicalJson(e.dsl)) return 'unchanged';
    await addVersion(store, LOCAL_TENANT, e.id, e.dsl, true);
    return 'updated';
  }
}

/** JSON with object keys sorted, so that key order does not count as a difference. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
