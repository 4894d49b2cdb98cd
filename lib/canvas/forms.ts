/**
 * Form fields (Begin inputs, UserFillUp inputs) and the values users submit to them.
 * Submitted values are accepted raw (`{"age": 42}`) or as RAGFlow's dicts
 * (`{"age": {"type": "integer", "value": 42}}`) and normalised to the field's type here, so
 * a wrong type is refused before the turn changes anything.
 */
import { sameJson, schemaProblems } from './json-schema';
import { isRecord } from './references';

export const FIELD_TYPES = [
  'line',
  'paragraph',
  'options',
  'integer',
  'float',
  'number',
  'boolean',
  'object',
  'file',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export interface FormField {
  /** The variable name (the key in `inputs`); downstream reads it as `{cpn@key}`. */
  key: string;
  /** The label shown to the user. */
  name: string;
  type: FieldType;
  optional: boolean;
  options?: string[];
  /**
   * A decision (UserFillUp `decisions`): an `options` field whose options are the decisions'
   * ids, each with the label a person sees on its button; the answer names one.
   */
  decisions?: Decision[];
  description?: string;
  /**
   * An `object` field's JSON Schema (an Agent approval's `arguments`: the tool's parameters): a
   * submitted value other than the preset must fit it, else it is refused as any wrong value.
   */
  schema?: Record<string, unknown>;
  /** Preset or current value; null when none. */
  value: unknown;
}

/**
 * A form's link to be e-mailed when the run pauses there (UserFillUp `form_link_email`),
 * rendered at the pause; the link itself is made from the committed turn (lib/turns).
 */
export interface PauseMail {
  component_id: string;
  /** The addresses, each checked. */
  to: string[];
  /** What did not give an address (a reference with no value, text that is no address). */
  problems: string[];
  subject: string;
  /** HTML; `{form_link}` and `{expires_at}` stand for the link and its expiry. */
  body: string;
  /** The link's lifetime, counted from the pause. */
  expires_in_seconds: number;
}

/** One choice of a decision field: the id an answer names, and its button's label. */
export interface Decision {
  id: string;
  label: string;
}

/**
 * Nothing there: RAGFlow's notion of an unanswered field. Blank text and an empty file list
 * are empty; an empty list or object is a real answer to an `object` field.
 */
export function isEmptyValue(value: unknown, type?: FieldType): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === 'string') return value.trim() === '';
  if (Array.isArray(value)) return value.length === 0 && type !== 'object';
  return false;
}

export type Normalized = { ok: true; value: unknown } | { ok: false; message: string };

/**
 * Unwraps RAGFlow's `{type, value}` dict. An `object` field keeps a plain object as it is
 * unless it clearly is such a dict (a `value` key beside a known field `type`).
 */
export function unwrapSubmitted(field: FormField, submitted: unknown): unknown {
  if (!isRecord(submitted) || !Object.hasOwn(submitted, 'value')) return submitted;
  if (field.type !== 'object') return submitted.value;
  const type = submitted.type;
  return typeof type === 'string' && (FIELD_TYPES as readonly string[]).includes(type)
    ? submitted.value
    : submitted;
}

/** Converts a submitted value to the field's type, or says why it cannot. Empty stays null. */
export function normalizeFieldValue(field: FormField, submitted: unknown): Normalized {
  const raw = unwrapSubmitted(field, submitted);
  if (isEmptyValue(raw, field.type)) return { ok: true, value: null };
  switch (field.type) {
    case 'line':
    case 'paragraph':
      if (typeof raw === 'string') return { ok: true, value: raw };
      if (typeof raw === 'number' || typeof raw === 'boolean') return { ok: true, value: String(raw) };
      return { ok: false, message: 'expected text' };
    case 'options': {
      const text = typeof raw === 'number' ? String(raw) : raw;
      if (typeof text !== 'string') return { ok: false, message: 'expected one of the options' };
      if (field.options && field.options.length > 0 && !field.options.includes(text)) {
        return { ok: false, message: `expected one of: ${field.options.join(', ')}` };
      }
      return { ok: true, value: text };
    }
    case 'integer': {
      const n = toNumber(raw);
      return n !== undefined && Number.isSafeInteger(n)
        ? { ok: true, value: n }
        : { ok: false, message: 'expected an integer' };
    }
    case 'float':
    case 'number': {
      const n = toNumber(raw);
      return n === undefined ? { ok: false, message: 'expected a number' } : { ok: true, value: n };
    }
    case 'boolean':
      if (typeof raw === 'boolean') return { ok: true, value: raw };
      if (raw === 'true' || raw === 'false') return { ok: true, value: raw === 'true' };
      return { ok: false, message: 'expected true or false' };
    case 'object':
      return fitSchema(field, normalizeObject(raw));
    case 'file':
      return normalizeFile(raw);
  }
}

function toNumber(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isFinite(raw) ? raw : undefined;
  if (typeof raw !== 'string' || !/^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(raw)) {
    return undefined;
  }
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

function normalizeObject(raw: unknown): Normalized {
  if (typeof raw === 'object' && raw !== null) return { ok: true, value: raw };
  if (typeof raw !== 'string') return { ok: false, message: 'expected a JSON object or list' };
  try {
    const parsed: unknown = JSON.parse(raw);
    if (typeof parsed === 'object' && parsed !== null) return { ok: true, value: parsed };
  } catch {
    // fall through to the error below
  }
  return { ok: false, message: 'expected a JSON object or list' };
}

/** An object field with a schema: a value changed from the preset must fit it (the preset is what was proposed, as it was). */
function fitSchema(field: FormField, normalized: Normalized): Normalized {
  if (!normalized.ok || !field.schema || sameJson(normalized.value, field.value)) return normalized;
  const problems = schemaProblems(field.schema, normalized.value);
  return problems.length === 0 ? normalized : { ok: false, message: `does not fit its JSON Schema: ${problems.join('; ')}` };
}

/** A file is referenced by id or by a descriptor object; several as a list. */
function normalizeFile(raw: unknown): Normalized {
  const isFileRef = (v: unknown) => (typeof v === 'string' && v.trim() !== '') || isRecord(v);
  if (isFileRef(raw)) return { ok: true, value: raw };
  if (Array.isArray(raw) && raw.every(isFileRef)) return { ok: true, value: raw };
  return { ok: false, message: 'expected a file id, a file object or a list of them' };
}

/**
 * RAGFlow's rule for whether a field still needs the user: it has no value, unless it is an
 * optional file field, or an optional field of a form that was already submitted (or of a form
 * that never holds for optional fields).
 */
export function fieldSatisfied(field: FormField, value: unknown, optionalSettled: boolean): boolean {
  if (!isEmptyValue(value, field.type)) return true;
  return field.optional && (field.type === 'file' || optionalSettled);
}
