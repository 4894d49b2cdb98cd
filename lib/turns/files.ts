/**
 * File fields: a turn's inputs name uploaded files by id (or, for a public key's upload not yet
 * used, by its file token); before the turn runs, each is looked up in the tenant's files and
 * replaced by `{file_id, name, size, mime_type, text?}` (text for text and JSON files, up to a
 * cap). An unknown id — another tenant's, or one the caller may not use — is an invalid input
 * of that field. A used file is kept at least as long as the run; a file named by its token is
 * bound to the run that names it first, and is that run's from then on. The files sent beside
 * a turn (`run_input.files`, RAGFlow's `files`) are resolved the same way into `sys.files`.
 *
 * `tenantFiles` is how a run's components read a file's bytes (a model shown an image).
 */
import type { Canvas, RunInput } from '../canvas';
import { InvalidInputsError, type InputProblem } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { NotFoundError } from '../store/errors';
import { bindFile, getFile, keepFileUntil, readFileContent, type StoredFile } from '../store/files';
import { getHead } from '../store/sessions';
import type { StoreContext } from '../store/dynamo';
import type { TurnEngine } from './execute';

export const MAX_FILE_TEXT_CHARS = 64 * 1024;

export interface FileValue {
  file_id: string;
  name: string;
  size: number;
  mime_type: string;
  text?: string;
  text_truncated?: boolean;
}

/** Which uploaded files a caller may name (lib/http/access.ts decides it from the principal). */
export interface FileAccess {
  /** The owners whose files the caller names by id, besides the run's own (`run:<id>`); null: any file of the tenant. */
  owners: readonly string[] | null;
  /** The file id a file token stands for, when it is a valid one. */
  fileOfToken?: (value: string) => Promise<string | null>;
}

export interface FileScope {
  /** The run the files are for: its own files are always usable; token-named files are bound to it. */
  runId: string;
  access?: FileAccess;
}

export async function resolveFileInputs(
  engine: TurnEngine,
  tenant: string,
  canvas: Canvas,
  runInput: RunInput | undefined,
  keepUntilSec: number,
  scope?: FileScope,
): Promise<RunInput | undefined> {
  const files = runInput?.files;
  if (runInput && Array.isArray(files) && files.length > 0) {
    runInput = { ...runInput, files: await resolveFileList(engine, tenant, files, keepUntilSec, scope) };
  }
  const inputs = runInput?.inputs;
  if (!inputs) return runInput;
  const fileFields = canvas.inputFields().filter(({ field }) => field.type === 'file' && Object.hasOwn(inputs, field.key));
  if (fileFields.length === 0) return runInput;
  const problems: InputProblem[] = [];
  const resolved: Record<string, unknown> = { ...inputs };
  for (const { componentId, field } of fileFields) {
    const raw = unwrap(inputs[field.key]);
    if (raw === null || raw === undefined || raw === '') continue;
    const refs = (Array.isArray(raw) ? raw : [raw]).map(fileRefOf);
    if (refs.some((ref) => ref === undefined)) {
      problems.push({ component_id: componentId, field: field.key, message: 'expected a file id (or file token) from POST /workflows/v1/files' });
      continue;
    }
    try {
      const values = await Promise.all((refs as string[]).map((ref) => describe(engine, tenant, ref, keepUntilSec, scope)));
      resolved[field.key] = Array.isArray(raw) ? values : values[0];
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
      problems.push({ component_id: componentId, field: field.key, message: 'unknown file id' });
    }
  }
  if (problems.length > 0) throw new InvalidInputsError(problems);
  return { ...runInput, inputs: resolved };
}

/** Files given beside a turn (RAGFlow's `files`): descriptors or ids, resolved the same way. */
export async function resolveFileList(engine: TurnEngine, tenant: string, files: readonly unknown[], keepUntilSec: number, scope?: FileScope): Promise<FileValue[]> {
  const refs = files.map(fileRefOf);
  if (refs.some((ref) => ref === undefined)) throw new InvalidInputsError([{ component_id: 'begin', field: 'files', message: 'expected file descriptors or ids from an upload' }]);
  try {
    return await Promise.all((refs as string[]).map((ref) => describe(engine, tenant, ref, keepUntilSec, scope)));
  } catch (error) {
    if (error instanceof NotFoundError) throw new InvalidInputsError([{ component_id: 'begin', field: 'files', message: 'unknown file id' }]);
    throw error;
  }
}

function unwrap(value: unknown): unknown {
  return isRecord(value) && 'value' in value && 'type' in value ? value.value : value;
}

const FILE_ID = /^file_[0-9a-f]{32}$/;
/** A file token (lib/http/access.ts): `ft1.<file id>.<key id>.<mac>`. */
const FILE_TOKEN = /^ft1\.file_[0-9a-f]{32}\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9_-]{20,128}$/;

/** A file id or file token, from a bare string or an upload's descriptor. */
function fileRefOf(value: unknown): string | undefined {
  const ref = typeof value === 'string' ? value : isRecord(value) ? (value.file_token ?? value.file_id ?? value.id) : undefined;
  return typeof ref === 'string' && (FILE_ID.test(ref) || FILE_TOKEN.test(ref)) ? ref : undefined;
}

/** The file a reference names, if the caller may use it for the run (else NotFoundError). */
async function usableFile(engine: TurnEngine, tenant: string, ref: string, scope: FileScope | undefined): Promise<StoredFile> {
  const access = scope?.access;
  const tokenFileId = FILE_TOKEN.test(ref) ? (ref.split('.')[1] as string) : undefined;
  // an admin key names any file of its tenant
  if (access?.owners === null) return getFile(engine.store, tenant, tokenFileId ?? ref);
  if (!access) {
    if (!tokenFileId) return getFile(engine.store, tenant, ref);
    // no verifier here (a queued turn's worker): a token is good only for a file its request
    // already bound to this run when it was accepted
    const file = await getFile(engine.store, tenant, tokenFileId);
    if (scope && file.owner === `run:${scope.runId}`) return file;
    throw new NotFoundError('file');
  }
  const own = `run:${scope.runId}`;
  if (FILE_ID.test(ref)) {
    const file = await getFile(engine.store, tenant, ref);
    if (file.owner === own || (file.owner !== undefined && access.owners.includes(file.owner))) return file;
    throw new NotFoundError('file');
  }
  const id = access.fileOfToken ? await access.fileOfToken(ref) : null;
  if (!id) throw new NotFoundError('file');
  let bound = await bindFile(engine.store, tenant, id, own);
  // bound by a first turn that never committed (its run does not exist): this run takes it
  if ('takenBy' in bound && bound.takenBy.startsWith('run:') && !(await runExists(engine, tenant, bound.takenBy.slice(4)))) {
    bound = await bindFile(engine.store, tenant, id, own, bound.takenBy);
  }
  if ('takenBy' in bound) throw new NotFoundError('file');
  return bound.file;
}

async function runExists(engine: TurnEngine, tenant: string, runId: string): Promise<boolean> {
  try {
    await getHead(engine.store, tenant, runId);
    return true;
  } catch (error) {
    if (error instanceof NotFoundError) return false;
    throw error;
  }
}

async function describe(engine: TurnEngine, tenant: string, ref: string, keepUntilSec: number, scope: FileScope | undefined): Promise<FileValue> {
  const file = await usableFile(engine, tenant, ref, scope);
  await keepFileUntil(engine.store, file, keepUntilSec);
  const value: FileValue = { file_id: file.id, name: file.name, size: file.size, mime_type: file.mimeType };
  if (isText(file)) {
    const text = (await readFileContent(engine.store, file)).toString('utf8');
    value.text = text.slice(0, MAX_FILE_TEXT_CHARS);
    if (text.length > MAX_FILE_TEXT_CHARS) value.text_truncated = true;
  }
  return value;
}

function isText(file: StoredFile): boolean {
  return file.mimeType.startsWith('text/') || /json|xml|csv|yaml|markdown/.test(file.mimeType);
}

/** The files a tenant's runs read (the `files` service of lib/components/services): bytes by file id. */
export function tenantFiles(store: StoreContext, tenant: string): { read(fileId: string): Promise<{ bytes: Uint8Array; mime_type: string; name: string; sha256: string } | undefined> } {
  return {
    async read(fileId) {
      let file: StoredFile;
      try {
        file = await getFile(store, tenant, fileId);
      } catch (error) {
        if (error instanceof NotFoundError) return undefined;
        throw error;
      }
      const bytes = await readFileContent(store, file);
      // content goes only once all its chunks are written; a short read is a file going away
      if (bytes.length !== file.size) return undefined;
      return { bytes, mime_type: file.mimeType, name: file.name, sha256: file.sha256 };
    },
  };
}
