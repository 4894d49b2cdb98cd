/**
 * What a create or update of an agent sends, read as RAGFlow reads it: a DSL object or its JSON
 * text, checked by Easel's compiler; a title (text, or a template file's `{en, ...}`) that no
 * other agent of the tenant's category holds in any case; a description; a canvas type and
 * category. A RAGFlow template file as it ships (`{id, title, description, canvas_type, dsl}`)
 * is such a body.
 */
import { compileWorkflow } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { englishText } from '../../canvas/template-file';
import type { ComponentRegistry } from '../../canvas/component';
import type { Workflow } from '../../store/workflows';
import { RAGFLOW, RagflowError } from './envelope';

/** RAGFlow's title column. */
const MAX_TITLE = 255;
const MAX_DESCRIPTION = 2000;
const MAX_CANVAS_TYPE = 64;

/** The DSL sent, parsed and compiled; refused in RAGFlow's words, or with every problem Easel finds. */
/** The DSL sent (an object, or its JSON text), not yet compiled. */
export function readDsl(dsl: unknown): Record<string, unknown> {
  let value = dsl;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      throw new RagflowError(RAGFLOW.argument, 'Invalid DSL JSON string.', false);
    }
  }
  if (!isRecord(value)) throw new RagflowError(RAGFLOW.argument, 'DSL must be a JSON object.', false);
  return value;
}

/** Compiles a DSL, its problems as RAGFlow's argument error. */
export function compileDsl(value: Record<string, unknown>, registry: ComponentRegistry, maxComponents: number): void {
  try {
    compileWorkflow(value, registry, { maxComponents });
  } catch (error) {
    const problems = (error as { problems?: { component_id?: string; field?: string; message: string }[] }).problems;
    const detail = problems?.map((p) => [p.component_id, p.field].filter(Boolean).join('.') + `: ${p.message}`).join('; ');
    throw new RagflowError(RAGFLOW.argument, `Invalid DSL: ${detail ?? (error as Error).message}`, false);
  }
}

/**
 * `drop_unsupported_tools`, in the body or the query (`?drop_unsupported_tools=true`): RAGFlow
 * has no such field, so its clients never send it.
 */
export function dropUnsupportedToolsOf(req: Record<string, unknown>, query: string | undefined): boolean {
  const value = req.drop_unsupported_tools ?? query;
  if (value === undefined || value === null) return false;
  if (value === true || value === 'true' || value === '1') return true;
  if (value === false || value === 'false' || value === '0') return false;
  throw new RagflowError(RAGFLOW.argument, 'drop_unsupported_tools must be true or false.', false);
}

/** The title sent (trimmed; a template's English one), or undefined when none was. */
export function titleOf(req: Record<string, unknown>): string | undefined {
  if (req.title === undefined || req.title === null) return undefined;
  const title = englishText(req.title)?.trim();
  if (!title) throw new RagflowError(RAGFLOW.argument, 'No title in request.', false);
  if (title.length > MAX_TITLE) throw new RagflowError(RAGFLOW.argument, `The title is over ${MAX_TITLE} characters.`, false);
  return title;
}

/** Description, canvas type and category, when sent (a template's English description). */
export function detailsOf(req: Record<string, unknown>): { description?: string; canvasType?: string; canvasCategory?: string } {
  const description = req.description === undefined || req.description === null ? undefined : englishText(req.description);
  const text = (name: string, value: unknown, max: number) => {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string' || value.length > max) throw new RagflowError(RAGFLOW.argument, `${name} must be a string of at most ${max} characters.`, false);
    return value;
  };
  const canvasType = text('canvas_type', req.canvas_type, MAX_CANVAS_TYPE);
  const canvasCategory = text('canvas_category', req.canvas_category, MAX_CANVAS_TYPE);
  if (description !== undefined && description.length > MAX_DESCRIPTION) throw new RagflowError(RAGFLOW.argument, `The description is over ${MAX_DESCRIPTION} characters.`, false);
  return { ...(description !== undefined ? { description } : {}), ...(canvasType !== undefined ? { canvasType } : {}), ...(canvasCategory ? { canvasCategory } : {}) };
}

/** Refuses a title that another agent of the same category holds, in any case (RAGFlow's check). */
export function checkTitleFree(title: string, category: string, agents: readonly Workflow[], except?: string): void {
  const lower = title.toLowerCase();
  if (agents.some((w) => w.id !== except && w.canvasCategory === category && w.name.toLowerCase() === lower)) {
    throw new RagflowError(RAGFLOW.data, `${title} already exists.`);
  }
}
