/**
 * File fields: a turn's inputs name uploaded files by id; before the turn runs, each id is
 * looked up in the tenant's files and replaced by `{file_id, name, size, mime_type, text?}`
 * (text for text and JSON files, up to a cap). An unknown id — or another tenant's — is an
 * invalid input of that field. A used file is kept at least as long as the run.
 */
import type { Canvas, RunInput } from '../canvas';
import { InvalidInputsError, type InputProblem } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { NotFoundError } from '../store/errors';
import { getFile, keepFileUntil, readFileContent, type StoredFile } from '../store/files';
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

export async function resolveFileInputs(
  engine: TurnEngine,
  tenant: string,
  canvas: Canvas,
  runInput: RunInput | undefined,
  keepUntilSec: number,
): Promise<RunInput | undefined> {
  const inputs = runInput?.inputs;
  if (!inputs) return runInput;
  const fileFields = canvas.inputFields().filter(({ field }) => field.type === 'file' && Object.hasOwn(inputs, field.key));
  if (fileFields.length === 0) return runInput;
  const problems: InputProblem[] = [];
  const resolved: Record<string, unknown> = { ...inputs };
  for (const { componentId, field } of fileFields) {
    const raw = unwrap(inputs[field.key]);
    if (raw === null || raw === undefined || raw === '') continue;
    const ids = (Array.isArray(raw) ? raw : [raw]).map(fileIdOf);
    if (ids.some((id) => id === undefined)) {
      problems.push({ component_id: componentId, field: field.key, message: 'expected a file id from POST /workflows/v1/files' });
      continue;
    }
    try {
      const values = await Promise.all((ids as string[]).map((id) => describe(engine, tenant, id, keepUntilSec)));
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
export async function resolveFileList(engine: TurnEngine, tenant: string, files: readonly unknown[], keepUntilSec: number): Promise<FileValue[]> {
  const ids = files.map(fileIdOf);
  if (ids.some((id) => id === undefined)) throw new InvalidInputsError([{ component_id: 'begin', field: 'files', message: 'expected file descriptors or ids from an upload' }]);
  try {
    return await Promise.all((ids as string[]).map((id) => describe(engine, tenant, id, keepUntilSec)));
  } catch (error) {
    if (error instanceof NotFoundError) throw new InvalidInputsError([{ component_id: 'begin', field: 'files', message: 'unknown file id' }]);
    throw error;
  }
}

function unwrap(value: unknown): unknown {
  return isRecord(value) && 'value' in value && 'type' in value ? value.value : value;
}

function fileIdOf(value: unknown): string | undefined {
  const id = typeof value === 'string' ? value : isRecord(value) ? (value.file_id ?? value.id) : undefined;
  return typeof id === 'string' && /^file_[0-9a-f]{32}$/.test(id) ? id : undefined;
}

async function describe(engine: TurnEngine, tenant: string, id: string, keepUntilSec: number): Promise<FileValue> {
  const file = await getFile(engine.store, tenant, id);
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
