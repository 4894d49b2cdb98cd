/**
 * Checks a value against a JSON Schema: what a tool's parameters accept, for the built-in tools
 * (lib/tools) and MCP servers' tools alike. Drafts 4, 7, 2019-09 and 2020-12, by the schema's
 * `$schema`, else 2020-12 (MCP's default). The validator interprets the schema (it compiles no
 * code from it), so a schema an MCP server sent is data only. Pure: no I/O.
 *
 * @example
 *   schemaProblems({ type: 'object', properties: { amount: { type: 'integer' } }, required: ['to'] }, { amount: 1.5 })
 *   // ['"to" is required', 'amount: expected integer, got number 1.5']
 */
import { deepCompareStrict, type OutputUnit, type Schema, type SchemaDraft, Validator } from '@cfworker/json-schema';

/** Problems reported at most; the rest are counted. */
const MAX_PROBLEMS = 5;

/** Keywords whose failure only says that something below them failed: the leaves say what. */
const CONTAINERS = new Set(['properties', 'additionalProperties', 'items', 'prefixItems', 'additionalItems', 'allOf', '$ref', '$recursiveRef', 'dependentSchemas', 'dependencies', 'patternProperties', 'contains', 'unevaluatedProperties', 'unevaluatedItems', 'propertyNames', 'if', 'then', 'else']);

/** What is wrong with `value` under `schema`, in words naming where; empty when it fits. */
export function schemaProblems(schema: Readonly<Record<string, unknown>>, value: unknown): string[] {
  let result;
  try {
    result = new Validator(schema as Schema, draftOf(schema), false).validate(value);
  } catch (error) {
    // an unresolvable $ref, a pattern that is no regular expression: nothing can be checked
    return [`the schema cannot be checked (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`];
  }
  if (result.valid) return [];
  const below = (o: OutputUnit, e: OutputUnit) => o.keywordLocation.startsWith(`${e.keywordLocation}/`) || o.instanceLocation.startsWith(`${e.instanceLocation}/`);
  const leaves = result.errors.filter((e) => !CONTAINERS.has(e.keyword) || !result.errors.some((o) => o !== e && below(o, e)));
  const problems = [...new Set(leaves.map((e) => describe(e, schema, value)))];
  return problems.length > MAX_PROBLEMS ? [...problems.slice(0, MAX_PROBLEMS), `and ${problems.length - MAX_PROBLEMS} more`] : problems;
}

/** The same JSON value, whatever the order of object keys. */
export function sameJson(a: unknown, b: unknown): boolean {
  return deepCompareStrict(a, b);
}

function draftOf(schema: Readonly<Record<string, unknown>>): SchemaDraft {
  const uri = typeof schema.$schema === 'string' ? schema.$schema : '';
  if (uri.includes('draft-04')) return '4';
  if (uri.includes('draft-07') || uri.includes('draft-06')) return '7';
  if (uri.includes('2019-09')) return '2019-09';
  return '2020-12';
}

/** `#/order/items/0` as its keys, `order`, `items`, `0`; the root as none. */
function segmentsOf(instanceLocation: string): string[] {
  return instanceLocation
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'));
}

function describe({ keyword, instanceLocation, keywordLocation, error }: OutputUnit, schema: unknown, root: unknown): string {
  const path = segmentsOf(instanceLocation).join('.');
  const at = (text: string) => (path ? `${path}: ${text}` : text);
  switch (keyword) {
    case 'required': {
      const name = /property "([^"]*)"/.exec(error)?.[1];
      return name !== undefined ? `"${path ? `${path}.${name}` : name}" is required` : at(error);
    }
    case 'type': {
      const expected = /Expected (.*)\.$/.exec(error)?.[1]?.replace(/"/g, '');
      return expected ? at(`expected ${expected}, got ${typeName(valueAt(root, instanceLocation))}`) : at(error);
    }
    case 'enum':
      return at(error.replace(/^Instance does not match any of /, 'must be one of ').replace(/\.$/, ''));
    case 'pattern':
      return at(`does not match the pattern ${String(valueAt(schema, keywordLocation))}`);
    case 'false':
      // a property that `additionalProperties: false` (or a `false` schema) leaves out
      return `"${path}" is not one of the parameters`;
    default:
      return at(lowerFirst(error.replace(/\.$/, '')));
  }
}

function valueAt(root: unknown, instanceLocation: string): unknown {
  let current = root;
  for (const segment of segmentsOf(instanceLocation)) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return `text ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return `${typeof value} ${String(value)}`;
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
