/**
 * `npm run -s secrets -- <command>`: the operator's rotation tasks for tenant secrets, run
 * against the store and the master key of the configuration (the same EASEL_* variables as
 * the server: EASEL_DYNAMODB_ENDPOINT / EASEL_DYNAMODB_TABLE, EASEL_MASTER_KEY_PARAMETER or
 * EASEL_MASTER_KEY_FILE). Exit codes: 0 done, 1 failed, 2 usage.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { ConfigError, readConfig } from '../config';
import {
  DEFAULT_ACCEPT_PREVIOUS_MS,
  formatKeyRing,
  LocalKeyFile,
  MasterKeyError,
  newKeyRing,
  parseKeyRing,
  rotateKeyRing,
  setupSecrets,
} from '../secrets';
import { migrateStoredToolCredentials } from '../secrets/migrate-tool-credentials';
import { createDynamoClients } from '../store/setup';
import { builtinTools } from '../tools/registry';

const USAGE = `usage: npm run -s secrets -- <command>
  rotate-master [--accept-previous-days <n>]
         a new master key; the old one stays accepted for n days (default 30). With a local
         key file the file is rewritten; with EASEL_MASTER_KEY_PARAMETER the new ring is
         printed, to store with: aws ssm put-parameter --type SecureString --overwrite
         --name <parameter> --value "$(npm run -s secrets -- rotate-master)"
  new-master-ring
         print a fresh ring (the first value of EASEL_MASTER_KEY_PARAMETER)
  rewrap re-wrap every tenant's data keys under the current master key (after rotate-master)
  rotate-data-key <tenant>
         a new data key for the tenant; its values are re-encrypted, the old key deleted
  migrate-tool-credentials [--tenant <id>]
         take the credentials tool params hold out of every stored workflow version: values
         move into their tenant's secrets and the version names them (as imports do)`;

export async function runSecretsCli(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  io: { out: (line: string) => void; err: (line: string) => void; getParameter?: (name: string) => Promise<string | undefined> } = {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  },
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], allowPositionals: true, options: { 'accept-previous-days': { type: 'string' }, tenant: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  } catch (error) {
    io.err(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const [command, ...rest] = parsed.positionals;
  if (parsed.values.help || command === undefined) {
    io.out(USAGE);
    return command === undefined && !parsed.values.help ? 2 : 0;
  }
  try {
    const config = readConfig(env);
    const getParameter = io.getParameter ?? ssmParameter;
    switch (command) {
      case 'new-master-ring':
        io.out(formatKeyRing(newKeyRing()).trimEnd());
        return 0;
      case 'rotate-master': {
        const days = parsed.values['accept-previous-days'];
        const acceptMs = days === undefined ? DEFAULT_ACCEPT_PREVIOUS_MS : Number(days) * 86_400_000;
        if (!Number.isFinite(acceptMs) || acceptMs < 0) throw new UsageError('--accept-previous-days takes a number of days');
        if (config.secrets.masterKeyParameter) {
          const text = await getParameter(config.secrets.masterKeyParameter);
          if (!text) throw new MasterKeyError(`the master key parameter ${config.secrets.masterKeyParameter} is empty or missing`);
          io.out(formatKeyRing(rotateKeyRing(parseKeyRing(text), { acceptPreviousMs: acceptMs })).trimEnd());
          io.err(`store the ring above in ${config.secrets.masterKeyParameter}, then run: npm run -s secrets -- rewrap`);
          return 0;
        }
        const file = new LocalKeyFile(config.secrets.masterKeyFile ?? join(process.cwd(), '.easel', 'master-key.json'));
        const ring = await file.rotate(acceptMs);
        io.err(`${file.path}: current key ${ring.current.id}; ${ring.previous.map((k) => `${k.id} accepted until ${new Date(k.until ?? 0).toISOString()}`).join(', ')}`);
        return 0;
      }
      case 'migrate-tool-credentials': {
        const { doc } = createDynamoClients(config.store.endpoint ? { endpoint: config.store.endpoint } : {});
        const store = { doc, table: config.store.table };
        const { tenantSecrets } = setupSecrets(config.secrets, { store, getParameter });
        const tenant = parsed.values.tenant;
        const report = await migrateStoredToolCredentials(store, tenantSecrets, (kind) => builtinTools.kind(kind)?.credentials, tenant === undefined ? {} : { tenant });
        for (const m of report.moved) io.out(`${m.tenant} ${m.workflowId} v${m.version} ${m.field} -> {secret.${m.secret}}`);
        io.err(`read ${report.scanned} version(s), rewrote ${report.rewritten}, moved ${report.moved.length} credential(s)${report.raced ? `; ${report.raced} changed meanwhile: run it again` : ''}`);
        return report.raced ? 1 : 0;
      }
      case 'rewrap':
      case 'rotate-data-key': {
        if (command === 'rotate-data-key' && rest.length !== 1) throw new UsageError('rotate-data-key takes the tenant id');
        const { doc } = createDynamoClients(config.store.endpoint ? { endpoint: config.store.endpoint } : {});
        const { tenantSecrets } = setupSecrets(config.secrets, { store: { doc, table: config.store.table }, getParameter });
        if (command === 'rewrap') {
          const { rewrapped, unreadable } = await tenantSecrets.rewrapAll();
          io.err(`re-wrapped ${rewrapped} data key(s)${unreadable ? `; ${unreadable} no key of the ring opens (their values are lost)` : ''}`);
          return unreadable ? 1 : 0;
        }
        const { version, reencrypted } = await tenantSecrets.rotateDataKey(rest[0] as string);
        io.err(`tenant ${rest[0]}: data key version ${version}, ${reencrypted} value(s) re-encrypted`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n${USAGE}`);
      return 2;
    }
    io.err(error instanceof ConfigError || error instanceof MasterKeyError ? error.message : `failed: ${(error as Error).message}`);
    return 1;
  }
}

class UsageError extends Error {}

async function ssmParameter(name: string): Promise<string | undefined> {
  const { getParameter } = await import('@aws-lambda-powertools/parameters/ssm');
  return getParameter(name, { decrypt: true, maxAge: 0 });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await runSecretsCli(process.argv.slice(2), process.env);
}
