/**
 * `{secret.NAME}` for one tenant's run: the tenant's own secrets first, then the operator's
 * secrets (EASEL_SECRET_*, EASEL_SSM_SECRETS) — but only the names the operator allow-listed for
 * this tenant (EASEL_OPERATOR_SECRETS_FOR_TENANTS). Any other name does not resolve, so a
 * tenant's DSL cannot send an operator secret to a URL of its choosing.
 *
 * A resolver is made per run (per turn): values it looked up are kept for that turn only.
 *
 * @example
 *   const resolverFor = secretResolver({ tenantSecrets, operator: { get: async (n) => env[n], allow: { acme: ['SHARED_CRM'] } } });
 *   await resolverFor('acme')('SHARED_CRM'); // the operator's value
 *   await resolverFor('other')('SHARED_CRM'); // undefined
 */
import type { TenantSecrets } from './tenant-secrets';

export type SecretResolver = (name: string) => Promise<string | undefined>;

export interface OperatorSecrets {
  /** An operator secret's value by name. */
  get(name: string): Promise<string | undefined>;
  /** Tenant id -> the operator secret names that tenant may use. */
  allow: Readonly<Record<string, readonly string[]>>;
}

export function secretResolver(options: { tenantSecrets?: TenantSecrets; operator?: OperatorSecrets }): (tenant: string) => SecretResolver {
  return (tenant) => {
    const seen = new Map<string, Promise<string | undefined>>();
    const allowed = new Set(options.operator ? (Object.hasOwn(options.operator.allow, tenant) ? options.operator.allow[tenant] : undefined) ?? [] : []);
    const lookup = async (name: string): Promise<string | undefined> => {
      const own = await options.tenantSecrets?.get(tenant, name);
      if (own !== undefined) return own;
      if (options.operator && allowed.has(name)) return options.operator.get(name);
      return undefined;
    };
    return (name) => {
      let value = seen.get(name);
      if (!value) {
        value = lookup(name);
        seen.set(name, value);
        // a failed read (the store unavailable) is not remembered
        value.catch(() => seen.delete(name));
      }
      return value;
    };
  };
}
