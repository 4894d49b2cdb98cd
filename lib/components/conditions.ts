/**
 * Comparison operators of Switch and of Loop's termination conditions. They differ as in
 * RAGFlow: Switch compares text case-insensitively and coerces numbers; Loop dispatches on
 * the variable's type and compares text exactly.
 */
import { z } from 'zod';
import { ComponentError } from '../canvas/errors';
import { isRecord } from '../canvas/references';

export const SWITCH_OPERATORS = [
  'contains',
  'not contains',
  'start with',
  'end with',
  'empty',
  'not empty',
  '=',
  '≠',
  '>',
  '<',
  '≥',
  '≤',
] as const;
export type SwitchOperator = (typeof SWITCH_OPERATORS)[number];

export const LOOP_OPERATORS = [...SWITCH_OPERATORS, 'is', 'is not'] as const;
export type LoopOperator = (typeof LOOP_OPERATORS)[number];

/** ASCII spellings accepted for the symbols. */
const ALIASES: Record<string, string> = { '!=': '≠', '>=': '≥', '<=': '≤', '==': '=' };

export function canonicalOperator(op: string): string {
  const trimmed = op.trim();
  return ALIASES[trimmed] ?? trimmed;
}

/** Python's truthiness, which RAGFlow's `empty` relies on. */
export function truthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (typeof value === 'number') return value !== 0 && !Number.isNaN(value);
  if (typeof value === 'string') return value !== '';
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return true;
}

/** Like Python's float(): whitespace allowed, "" and junk refused. */
export function parseFloatStrict(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value !== 'string') return undefined;
  const t = value.trim().toLowerCase();
  if (t === '') return undefined;
  if (t === 'inf' || t === '+inf' || t === 'infinity' || t === '+infinity') return Infinity;
  if (t === '-inf' || t === '-infinity') return -Infinity;
  if (t === 'nan') return Number.NaN;
  return /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(t) ? Number(t) : undefined;
}

function lower(value: unknown, side: string): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value.toLowerCase();
  if (typeof value === 'number' || typeof value === 'boolean') return String(value).toLowerCase();
  throw new ComponentError(`the ${side} of a text comparison is not text`);
}

function containsCaseless(left: unknown, right: unknown): boolean {
  if (Array.isArray(left)) {
    const needle = lower(right, 'value');
    return left.some((item) => (typeof item === 'string' ? item.toLowerCase() === needle : item === right));
  }
  return lower(left, 'variable').includes(lower(right, 'value'));
}

/** Switch: one condition item. `left` is the variable's value, `right` the configured value. */
export function switchCompare(left: unknown, operator: string, right: unknown): boolean {
  const op = canonicalOperator(operator);
  let operand = right ?? '';
  // Numbers compare as numbers; `empty` and `not empty` take no operand to convert.
  if ((typeof left === 'number' || typeof left === 'boolean') && op !== 'empty' && op !== 'not empty') {
    const n = parseFloatStrict(operand);
    if (n === undefined) throw new ComponentError(`cannot compare the number ${String(left)} with "${String(operand)}"`);
    operand = n;
    left = typeof left === 'boolean' ? Number(left) : left;
  }
  switch (op) {
    case 'contains':
      return containsCaseless(left, operand);
    case 'not contains':
      return !containsCaseless(left, operand);
    case 'start with':
      return lower(left, 'variable').startsWith(lower(operand, 'value'));
    case 'end with':
      return lower(left, 'variable').endsWith(lower(operand, 'value'));
    case 'empty':
      return !truthy(left);
    case 'not empty':
      return truthy(left);
    case '=':
      return looseEqual(left, operand);
    case '≠':
      return !looseEqual(left, operand);
    case '>':
    case '<':
    case '≥':
    case '≤':
      return order(left, op, operand);
    default:
      throw new ComponentError(`unsupported operator "${operator}"`);
  }
}

function looseEqual(a: unknown, b: unknown): boolean {
  if (typeof a === 'object' || typeof b === 'object') return JSON.stringify(a) === JSON.stringify(b);
  return a === b;
}

function order(left: unknown, op: '>' | '<' | '≥' | '≤', right: unknown): boolean {
  const l = parseFloatStrict(left);
  const r = parseFloatStrict(right);
  if (l !== undefined && r !== undefined) return compareWith(l, op, r);
  if (typeof left === 'string' && typeof right === 'string') return compareWith(left, op, right);
  throw new ComponentError(`cannot order ${typeName(left)} against ${typeName(right)}`);
}

function compareWith<T extends number | string>(l: T, op: '>' | '<' | '≥' | '≤', r: T): boolean {
  switch (op) {
    case '>':
      return l > r;
    case '<':
      return l < r;
    case '≥':
      return l >= r;
    case '≤':
      return l <= r;
  }
}

function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value}`;
}

/** Loop termination: dispatches on the variable's type, as RAGFlow's LoopItem does. */
export function loopCompare(variable: unknown, operator: string, value: unknown): boolean {
  const op = canonicalOperator(operator);
  const invalid = () => new ComponentError(`operator "${operator}" does not apply to ${typeName(variable)}`);
  if (variable === null || variable === undefined) return op === 'empty';
  if (typeof variable === 'boolean') {
    const v = typeof value === 'string' ? value.trim().toLowerCase() === 'true' : value === true;
    if (op === 'is') return variable === v;
    if (op === 'is not') return variable !== v;
    if (op === 'empty') return false;
    if (op === 'not empty') return true;
    throw invalid();
  }
  if (typeof variable === 'string') {
    const v = value === null || value === undefined ? '' : String(value);
    switch (op) {
      case 'contains':
        return variable.includes(v);
      case 'not contains':
        return !variable.includes(v);
      case 'start with':
        return variable.startsWith(v);
      case 'end with':
        return variable.endsWith(v);
      case 'is':
      case '=':
        return variable === v;
      case 'is not':
      case '≠':
        return variable !== v;
      case 'empty':
        return variable === '';
      case 'not empty':
        return variable !== '';
      default:
        throw invalid();
    }
  }
  if (typeof variable === 'number') {
    if (op === 'empty') return false;
    if (op === 'not empty') return true;
    const n = parseFloatStrict(value);
    if (n === undefined) throw new ComponentError(`cannot compare the number ${variable} with "${String(value)}"`);
    switch (op) {
      case '=':
      case 'is':
        return variable === n;
      case '≠':
      case 'is not':
        return variable !== n;
      case '>':
      case '<':
      case '≥':
      case '≤':
        return compareWith(variable, op, n);
      default:
        throw invalid();
    }
  }
  if (Array.isArray(variable)) {
    switch (op) {
      case 'contains':
        return variable.some((item) => looseEqual(item, value));
      case 'not contains':
        return !variable.some((item) => looseEqual(item, value));
      case 'is':
        return looseEqual(variable, value);
      case 'is not':
        return !looseEqual(variable, value);
      case 'empty':
        return variable.length === 0;
      case 'not empty':
        return variable.length > 0;
      default:
        throw invalid();
    }
  }
  if (isRecord(variable)) {
    if (op === 'empty') return Object.keys(variable).length === 0;
    if (op === 'not empty') return Object.keys(variable).length > 0;
  }
  throw invalid();
}

/** The comparisons of DataOperations' and ListOperations' filters, as RAGFlow's editor offers them. */
export const TEXT_FILTER_OPERATORS = ['=', '≠', 'contains', 'start with', 'end with'] as const;
export type TextFilterOperator = (typeof TEXT_FILTER_OPERATORS)[number];

/** A filter's operator in the DSL: any case, ASCII `!=` and `==` too. */
export const textFilterOperator = z.lazy(() => z
  .string({ error: `must be one of: ${TEXT_FILTER_OPERATORS.join(', ')}` })
  .transform((op) => canonicalOperator(op.toLowerCase()))
  .pipe(z.enum(TEXT_FILTER_OPERATORS, { error: `must be one of: ${TEXT_FILTER_OPERATORS.join(', ')}` })));

/** Those filters compare text exactly (case-sensitive), unlike Switch. */
export function textMatches(value: string, operator: TextFilterOperator, target: string): boolean {
  switch (operator) {
    case '=':
      return value === target;
    case '≠':
      return value !== target;
    case 'contains':
      return value.includes(target);
    case 'start with':
      return value.startsWith(target);
    case 'end with':
      return value.endsWith(target);
  }
}
