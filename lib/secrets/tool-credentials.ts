/**
 * Moving the credentials a DSL's tools carry into a tenant's secrets (lib/tools/dsl-tools.ts
 * finds them): a value goes under the kind's secret name (`TAVILY_API_KEY`), or the first
 * numbered one (`TAVILY_API_KEY_2`, ...) free or holding that same value, and the DSL names it
 * instead. Used by every import (nothing is written until `commit()`) and by the migration of
 * the versions stored before imports did it (migrate-tool-credentials.ts).
 */
import { EaselError } from '../errors';
import { extractCredentials, type FoundCredential } from '../tools/dsl-tools';
import type { ToolCredential } from '../tools/registry';
import type { TenantSecrets } from './tenant-secrets';

export interface SealedToolCredentials {
  /** The DSL with every credential a reference. */
  dsl: Record<string, unknown>;
  /** Each credential found, with the secret it now names. */
  credentials: FoundCredential[];
  /** Secret names that will hold a value once committed, or already do. */
  isSet(name: string): Promise<boolean>;
  /** Writes the moved values. */
  commit(): Promise<void>;
}

/** How many numbered names (`_2` ... ) a kind's secret may take before the import gives up. */
const MAX_SECRET_SUFFIX = 50;

export async function sealToolCredentials(
  secrets: TenantSecrets | undefined,
  tenant: string,
  dsl: Record<string, unknown>,
  credentialsOf: (kind: string) => readonly ToolCredential[] | undefined,
): Promise<SealedToolCredentials> {
  const plan = extractCredentials(dsl, credentialsOf);
  const held = new Map<string, string | undefined>();
  const valueOf = async (name: string) => {
    if (!held.has(name)) held.set(name, secrets ? await secrets.get(tenant, name) : undefined);
    return held.get(name);
  };
  const chosen = new Map<string, string>();
  for (const c of plan.credentials.filter((c) => c.found === 'value')) {
    if (!secrets) throw new EaselError('unavailable', 'tenant secrets are not configured on this server: a credential in the DSL cannot be moved out of it');
    const value = plan.valueOf(c);
    if (value === undefined || chosen.has(value)) continue;
    chosen.set(value, await freeName(c.secret, value, valueOf, new Set(chosen.values())));
  }
  const { dsl: sealed, moves } = plan.assign((_c, value) => chosen.get(value) as string);
  const writes: { name: string; value: string }[] = [];
  for (const { name, value } of moves) {
    if ((await valueOf(name)) !== value) writes.push({ name, value });
    held.set(name, value);
  }
  return {
    dsl: sealed,
    credentials: plan.credentials,
    isSet: async (name) => (await valueOf(name)) !== undefined,
    async commit() {
      for (const { name, value } of writes) await secrets?.put(tenant, name, value);
    },
  };
}

/** `base` if the tenant has not set it (or holds this value there), else `base_2`, `base_3`, ... */
async function freeName(base: string, value: string, valueOf: (name: string) => Promise<string | undefined>, taken: ReadonlySet<string>): Promise<string> {
  for (let n = 1; n <= MAX_SECRET_SUFFIX; n++) {
    const name = n === 1 ? base : `${base}_${n}`.slice(0, 64);
    if (taken.has(name)) continue;
    const held = await valueOf(name);
    if (held === undefined || held === value) return name;
  }
  throw new EaselError('invalid_request', `the tenant already holds ${MAX_SECRET_SUFFIX} different values under ${base}: store this credential as a secret yourself and write {secret.NAME}`);
}
