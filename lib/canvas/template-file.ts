/**
 * RAGFlow's template files (its `agent/templates/*.json`): the canvas under `dsl`, beside a
 * title and description that are either text or one text per language, and the canvas type
 * and category it is shelved under. Importing one takes the English texts.
 *
 * @example
 *   const t = templateFields({ id: 11, title: { en: 'Feedback', zh: '反馈' }, canvas_type: 'Customer Support', dsl });
 *   // { title: 'Feedback', canvasType: 'Customer Support' }
 */
import { isRecord } from './references';

export interface TemplateFields {
  title?: string;
  description?: string;
  canvasType?: string;
  canvasCategory?: string;
}

/** The English text of a text-or-translations value: itself, its `en`, else its first text. */
export function englishText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!isRecord(value)) return undefined;
  if (typeof value.en === 'string') return value.en;
  return Object.values(value).find((v): v is string => typeof v === 'string');
}

/** Whether a document is a template file (a `dsl` object beside its own fields) rather than a bare DSL. */
export function isTemplateFile(doc: unknown): doc is Record<string, unknown> & { dsl: Record<string, unknown> } {
  return isRecord(doc) && isRecord(doc.dsl) && !isRecord(doc.components);
}

/** What a template file says about its canvas, in English; absent fields stay absent. */
export function templateFields(doc: Record<string, unknown>): TemplateFields {
  const title = englishText(doc.title)?.trim();
  const description = englishText(doc.description);
  return {
    ...(title ? { title } : {}),
    ...(description !== undefined ? { description } : {}),
    ...(typeof doc.canvas_type === 'string' ? { canvasType: doc.canvas_type } : {}),
    ...(typeof doc.canvas_category === 'string' ? { canvasCategory: doc.canvas_category } : {}),
  };
}
