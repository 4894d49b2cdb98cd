/**
 * Request bodies of RAGFlow's dataset routes, checked with zod and refused in the words of
 * RAGFlow's pydantic models (`format_validation_error_message`): one line per problem,
 * `Field: <name> - Message: <Field required> - Value: <{...}>`, code 101. The value is shown as
 * Python's `str()` shows it, cut at 128 characters.
 */
import type { z } from '@hono/zod-openapi';
import { isRecord } from '../../canvas/references';
import { pythonRepr } from '../../components/python-values';
import { RAGFLOW, RagflowError } from './envelope';

type Issue = z.core.$ZodIssue & { input?: unknown };

/** The body as the schema reads it, or code 101 with every problem in RAGFlow's format. */
export function ragflowArguments<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body, { reportInput: true });
  if (parsed.success) return parsed.data;
  throw new RagflowError(RAGFLOW.argument, parsed.error.issues.flatMap((issue) => lines(issue as Issue, body)).join('\n'));
}

/** One refused field, in the same format (for checks beyond the schema). */
export function fieldError(field: string, message: string, value: unknown): RagflowError {
  return new RagflowError(RAGFLOW.argument, line(field, message, value));
}

function lines(issue: Issue, body: unknown): string[] {
  const field = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const parent = valueAt(body, issue.path);
    return issue.keys.map((key) => line(field ? `${field}.${key}` : key, 'Extra inputs are not permitted', isRecord(parent) ? parent[key] : undefined));
  }
  // pydantic shows a missing field with the object it is missing from
  if (issue.code === 'invalid_type' && issue.input === undefined) return [line(field, 'Field required', valueAt(body, issue.path.slice(0, -1)))];
  return [line(field, message(issue), issue.input)];
}

function line(field: string, text: string, value: unknown): string {
  return `Field: <${field}> - Message: <${text}> - Value: <${shown(value)}>`;
}

function message(issue: Issue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `Input should be ${TYPE_NAMES[issue.expected] ?? `a valid ${issue.expected}`}`;
    case 'too_small':
      if (issue.origin === 'string') return `String should have at least ${issue.minimum} character${Number(issue.minimum) === 1 ? '' : 's'}`;
      if (issue.origin === 'array') return `List should have at least ${issue.minimum} item${Number(issue.minimum) === 1 ? '' : 's'} after validation`;
      return `Input should be greater than ${issue.inclusive ? 'or equal to ' : ''}${issue.minimum}`;
    case 'too_big':
      if (issue.origin === 'string') return `String should have at most ${issue.maximum} character${Number(issue.maximum) === 1 ? '' : 's'}`;
      if (issue.origin === 'array') return `List should have at most ${issue.maximum} item${Number(issue.maximum) === 1 ? '' : 's'} after validation`;
      return `Input should be less than ${issue.inclusive ? 'or equal to ' : ''}${issue.maximum}`;
    case 'invalid_value':
      return `Input should be ${alternatives(issue.values.map((v) => pythonRepr(v)))}`;
    default:
      return issue.message;
  }
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a valid string',
  number: 'a valid number',
  int: 'a valid integer',
  boolean: 'a valid boolean',
  array: 'a valid list',
  object: 'a valid dictionary',
  record: 'a valid dictionary',
};

/** `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`, as pydantic lists literals. */
export function alternatives(values: readonly string[]): string {
  return values.length <= 1 ? (values[0] ?? '') : `${values.slice(0, -1).join(', ')} or ${values.at(-1)}`;
}

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const key of path) value = isRecord(value) || Array.isArray(value) ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}

/** Python's `str()`, cut as RAGFlow cuts it. */
function shown(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value : pythonRepr(value);
  } catch {
    text = '...';
  }
  return text.length > 128 ? `${text.slice(0, 125)}...` : text;
}
