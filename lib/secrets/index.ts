/**
 * Tenant secrets, the master key ring and server keys, wired from configuration.
 *
 * Key hierarchy: master key ring (SSM SecureString, or `.easel/master-key.json` locally)
 *   -> wraps each tenant's data key (AES-256-GCM, stored in the tenant's partition)
 *     -> seals each secret value (AES-256-GCM).
 * The master ring also derives server keys (`serverKey(purpose)`) for signed tokens.
 *
 * @example
 *   const secrets = setupSecrets(config.secrets, { store, getParameter });
 *   await secrets.tenantSecrets.put('acme', 'CRM_TOKEN', 'tok_…');
 *   const resolve = secrets.resolverFor('acme'); // for `{secret.NAME}` in acme's runs
 */
import { join } from 'node:path';
import type { SecretsConfig } from '../config';
import type { StoreContext } from '../store/dynamo';
import { LocalKeyFile, MasterKeys, type MasterKeySource, SsmKeyRing } from './master-key';
import { secretResolver, type SecretResolver } from './resolver';
import { serverKey, type ServerKeySet } from './server-keys';
import { TenantSecrets } from './tenant-secrets';

export { SealError } from './crypto';
export * from './master-key';
export { redactSecrets, REDACTED, secretForms } from './redact';
export { secretResolver, type OperatorSecrets, type SecretResolver } from './resolver';
export { findServerKey, serverKey, type ServerKeySet, type ServerKeyVersion } from './server-keys';
export { MAX_SECRET_BYTES, SECRET_NAME, type SecretInfo, TenantSecrets } from './tenant-secrets';

export interface Secrets {
  tenantSecrets: TenantSecrets;
  master: MasterKeys;
  /** `{secret.NAME}` for one tenant's run. */
  resolverFor(tenant: string): SecretResolver;
  serverKey(purpose: string): Promise<ServerKeySet>;
}

export interface SecretsSetupOptions {
  store: StoreContext;
  /** Reads an SSM parameter (decrypted, cached); needed for the SSM-held master key and operator secrets. */
  getParameter?: (name: string) => Promise<string | undefined>;
  /** A master key source of the caller's (tests). */
  masterSource?: MasterKeySource;
  now?: () => number;
}

export function setupSecrets(config: SecretsConfig, options: SecretsSetupOptions): Secrets {
  const getParameter = options.getParameter ?? (async () => undefined);
  const source: MasterKeySource = options.masterSource
    ?? (config.masterKeyParameter
      ? new SsmKeyRing(config.masterKeyParameter, getParameter)
      : new LocalKeyFile(config.masterKeyFile ?? join(process.cwd(), '.easel', 'master-key.json')));
  const master = new MasterKeys(source, options.now);
  const tenantSecrets = new TenantSecrets({ store: options.store, master, ...(options.now ? { now: options.now } : {}) });
  const resolverFor = secretResolver({
    tenantSecrets,
    operator: {
      allow: config.operatorForTenants,
      async get(name) {
        if (Object.hasOwn(config.values, name)) return config.values[name];
        const parameter = Object.hasOwn(config.parameters, name) ? config.parameters[name] : undefined;
        return parameter ? getParameter(parameter) : undefined;
      },
    },
  });
  return { tenantSecrets, master, resolverFor, serverKey: (purpose) => serverKey(master, purpose) };
}
