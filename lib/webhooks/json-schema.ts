/**
 * The schema check of a webhook delivery: the JSON Schema subset RAGFlow's editor writes —
 * `type` (JSON Schema's, and RAGFlow's `array<T>`), `properties`, `required`, `items`, `enum` —
 * with RAGFlow's conversions: a string is cast to the declared type (`"42"` to 42, `"true"` to
 * true, JSON text to an object or list), since query strings, headers and forms carry only text.
 *
 * A section with declared `properties` keeps only those fields (RAGFlow's "extract by schema"),
 * a missing optional one getting its type's empty value (`""`, 0, false, [], {}); one without
 * passes as it came, except headers, which pass only when declared. Pure: no I/O.
 *
 * @example
 *   extractSection('body', { n: '5', extra: 1 }, { properties: { n: { type: 'number' } }, required: ['n'] }, { declaredOnly: false })
 *   // { value: { n: 5 }, problems: [] }
 */
import { isRecord } from '../canvas/references';
import type { FieldSchema } from '../components/webhook-params';

export interface SchemaProblem {
  /** `body.order.id`, `query.page`, `headers.X-Event`. */
  field: string;
  message: string;
}

const MAX_PROBLEMS = 20;

export interface SectionOptions {
  /** Only declared fields pass; nothing passes without a schema (headers). */
  declaredOnly: boolean;
  /** Field names match whatever their case (headers). */
  caseInsensitive?: boolean;
}

/** Checks and converts one section of a delivery (`query`, `headers` or `body`) against its schema. */
export function extractSection(section: string, data: unknown, schema: FieldSchema | undefined, options: SectionOptions): { value: unknown; problems: SchemaProblem[] } {
  const problems: SchemaProblem[] = [];
  const properties = schema?.properties;
  if (!schema || (!properties && !schema.required)) {
    if (options.declaredOnly) return { value: {}, problems };
    return { value: schema ? check(data, schema, section, problems) : data, problems };
  }
  if (!isRecord(data)) {
    problems.push({ field: section, message: `must be an object, got ${typeName(data)}` });
    return { value: {}, problems };
  }
  const find = (name: string): string | undefined => {
    if (Object.hasOwn(data, name)) return name;
    if (!options.caseInsensitive) return undefined;
    const lower = name.toLowerCase();
    return Object.keys(data).find((k) => k.toLowerCase() === lower);
  };
  const required = new Set(schema.required ?? []);
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const name of new Set([...Object.keys(properties ?? {}), ...required])) {
    const field = `${section}.${name}`;
    const key = find(name);
    const declared = properties?.[name];
    if (key === undefined) {
      if (required.has(name)) problems.push({ field, message: 'is required' });
      else if (declared) out[name] = emptyOf(declared.type);
      continue;
    }
    out[name] = declared ? check(data[key], declared, field, problems) : data[key];
  }
  return { value: { ...out }, problems: problems.slice(0, MAX_PROBLEMS) };
}

/** The value converted to its declared type, or as it is with a problem recorded. */
function check(value: unknown, schema: FieldSchema, field: string, problems: SchemaProblem[]): unknown {
  if (problems.length >= MAX_PROBLEMS) return value;
  const type = schema.type;
  let v = type ? cast(value, type) : value;
  if (type && !hasType(v, type)) {
    problems.push({ field, message: `expected ${type}, got ${typeName(value)}` });
    return value;
  }
  if (schema.enum && !schema.enum.some((allowed) => sameValue(allowed, v))) {
    problems.push({ field, message: `must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}` });
    return value;
  }
  if (isRecord(v) && (schema.properties || schema.required)) {
    const obj: Record<string, unknown> = { ...v };
    for (const name of schema.required ?? []) {
      if (!Object.hasOwn(v, name)) problems.push({ field: `${field}.${name}`, message: 'is required' });
    }
    for (const [name, sub] of Object.entries(schema.properties ?? {})) {
      if (Object.hasOwn(v, name)) obj[name] = check(v[name], sub, `${field}.${name}`, problems);
    }
    v = obj;
  }
  if (Array.isArray(v)) {
    const items = schema.items ?? inner(type);
    if (items) v = v.map((item, i) => check(item, items, `${field}.${i}`, problems));
  }
  return v;
}

/** `array<string>`'s element schema. */
function inner(type: string | undefined): FieldSchema | undefined {
  const m = type ? /^array<(\w+)>$/.exec(type) : null;
  return m ? { type: m[1] as string } : undefined;
}

/** RAGFlow's auto-cast: text to the declared type where it reads as one; anything else as it is. */
function cast(value: unknown, type: string): unknown {
  if (typeof value !== 'string') return value;
  const t = value.trim();
  switch (type) {
    case 'boolean':
      if (['true', '1'].includes(t.toLowerCase())) return true;
      if (['false', '0'].includes(t.toLowerCase())) return false;
      return value;
    case 'number':
    case 'integer':
      return t !== '' && Number.isFinite(Number(t)) ? Number(t) : value;
    case 'object':
    case 'array':
      return parseJson(t) ?? value;
    default:
      return type.startsWith('array<') ? (parseJson(t) ?? value) : value;
  }
}

function parseJson(text: string): unknown {
  if (!text.startsWith('{') && !text.startsWith('[')) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'object':
      return isRecord(value);
    case 'null':
      return value === null;
    default:
      return type === 'array' || type.startsWith('array<') ? Array.isArray(value) : true;
  }
}

/** RAGFlow's `default_for_type`: what a missing optional field reads as. */
function emptyOf(type: string | undefined): unknown {
  if (type === 'object') return {};
  if (type === 'boolean') return false;
  if (type === 'number' || type === 'integer') return 0;
  if (type === 'string') return '';
  if (type?.startsWith('array')) return [];
  return null;
}

function sameValue(a: unknown, b: unknown): boolean {
  return a === b || (typeof a === 'object' && a !== null && JSON.stringify(a) === JSON.stringify(b));
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}
