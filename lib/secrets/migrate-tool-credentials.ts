/**
 * The operator's migration of stored workflow versions (`npm run -s secrets --
 * migrate-tool-credentials`): the credentials tool params hold are taken out as an import takes
 * them out (tool-credentials.ts). Its own module: it scans the table, which no request path
 * does, so the API functions neither bundle it nor need the permission.
 */
import { isRecord } from '../canvas/references';
import type { StoreContext } from '../store/dynamo';
import { allVersions, rewriteVersion } from '../store/version-rewrite';
import type { ToolCredential } from '../tools/registry';
import type { TenantSecrets } from './tenant-secrets';
import { sealToolCredentials } from './tool-credentials';

export interface CredentialMigration {
  /** Versions read. */
  scanned: number;
  /** Versions rewritten: a credential moved out, or an empty or placeholder one made a reference. */
  rewritten: number;
  /** Values moved into tenant secrets, by where they were (never the value). */
  moved: { tenant: string; workflowId: string; version: number; field: string; secret: string }[];
  /** Versions that changed between the read and the rewrite (left as they are: run it again). */
  raced: number;
}

/**
 * Takes the tool credentials out of every stored version, as an import takes them out of a DSL
 * that arrives: values go to the tenant's secrets, the version names them. Versions stored
 * before imports did this may hold them; running it twice changes nothing the second time.
 */
export async function migrateStoredToolCredentials(
  store: StoreContext,
  secrets: TenantSecrets,
  credentialsOf: (kind: string) => readonly ToolCredential[] | undefined,
  options: { tenant?: string } = {},
): Promise<CredentialMigration> {
  const report: CredentialMigration = { scanned: 0, rewritten: 0, moved: [], raced: 0 };
  for await (const version of allVersions(store, options)) {
    report.scanned++;
    if (!isRecord(version.dsl)) continue;
    const sealed = await sealToolCredentials(secrets, version.tenant, version.dsl, credentialsOf);
    if (JSON.stringify(sealed.dsl) === JSON.stringify(version.dsl)) continue;
    await sealed.commit();
    if (!(await rewriteVersion(store, version, sealed.dsl))) {
      report.raced++;
      continue;
    }
    report.rewritten++;
    for (const c of sealed.credentials.filter((c) => c.found === 'value')) {
      report.moved.push({ tenant: version.tenant, workflowId: version.workflowId, version: version.version, field: `${c.component_id}.${c.field}`, secret: c.reference as string });
    }
  }
  return report;
}
