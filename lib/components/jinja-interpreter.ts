/**
 * @huggingface/jinja under caps. Loaded lazily by jinja.ts; nothing else imports it.
 *
 * How the caps hook in. The library parses a template into an AST and walks it with its
 * `Interpreter`, whose public `evaluate(node, env)` is the hub every node goes through (its
 * helpers call `this.evaluate` for each operand, argument and statement). `CappedInterpreter`
 * subclasses it and intercepts the few nodes that can make work or text grow without bound:
 *
 * - `For`: the iterable is evaluated first and the loop counts its length against
 *   `maxLoopIterations` before the library walks it (the library builds its list of items
 *   before running the body, so a loop is charged whole when it starts; nested loops multiply).
 *   Macro and `{% call %}` bodies count one per call, which bounds recursion too.
 * - `range`: the global is replaced by one that computes the length of the list and refuses it
 *   (`maxRangeLength`) before building it; it takes integers only, as Python's.
 * - `~` and `+`, and the filters `join`, `replace`, `indent`, `tojson`, `string`, and the
 *   `.replace()` method: their operands and arguments are evaluated here, the length of the
 *   result is computed from them (jinja-sizes.ts) and refused over `maxStringLength` (or, for
 *   list `+`, over `maxListLength`); the library then runs on the evaluated values, passed in
 *   as `Held` nodes, so nothing is evaluated twice.
 * - Blocks (a template, an `if` body, a loop round, a macro body): the library's private
 *   `evaluateBlock` is replaced on this subclass's prototype by one that checks each piece's
 *   length before appending it, and adds each loop round to its loop's running total before
 *   the library appends the round to the loop's output.
 * - Every other string or list a node returns is checked after it is made; those are at most
 *   a few times the size of values already checked (`upper`, a slice, `split`).
 *
 * Only `evaluateBlock` and `evaluateArguments` are internals of the library (private in its
 * typings, plain prototype methods in its JavaScript); `Internals` names them, the version is
 * pinned exactly, and test/components/jinja.test.ts fails if either stops being used.
 *
 * Differences from jinja2's sandbox kept small on purpose: `for` over an undefined name runs
 * no round and over a string runs over its characters; an undefined operand of `~` or of a
 * filter (other than `default` and `tojson`) reads as "". `strftime_now` (the clock) is not
 * offered: a render depends on its variables only.
 */
import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import type { JinjaCap, JinjaCaps } from './jinja';
import {
  indentedLength,
  isList,
  type JinjaValue,
  joinedLength,
  joinLength,
  jsonLength,
  type JsonLayout,
  PRINTED,
  printedLength,
  replacedLength,
} from './jinja-sizes';

type LibraryNode = NonNullable<Parameters<Interpreter['evaluate']>[0]>;
type LibraryValue = ReturnType<Interpreter['evaluate']>;

/** A cap was reached; jinja.ts turns it into a JinjaCapError. */
export class CapExceeded extends Error {
  constructor(
    readonly cap: JinjaCap,
    readonly limit: number,
    message: string,
  ) {
    super(message);
  }
}

/** The template does not parse. */
export class TemplateSyntaxError extends Error {}

// ---- the library's value classes, which it does not export, taken from values it makes ----
const probe = new Environment();
probe.set('s', '');
probe.set('a', []);
const StringValue = probe.lookupVariable('s').constructor as new (value: string) => LibraryValue;
const ArrayValue = probe.lookupVariable('a').constructor as new (value: LibraryValue[]) => LibraryValue;

/** An already evaluated value standing in for a node. */
const HELD = 'EaselHeldValue';
interface Held {
  type: typeof HELD;
  value: LibraryValue;
}
function hold(value: LibraryValue): LibraryNode {
  return { type: HELD, value } as Held as unknown as LibraryNode;
}

// ---- the shapes of the nodes intercepted (the library's AST classes, seen structurally) ----
interface Node {
  type: string;
}
interface IdentifierNode extends Node {
  value: string;
}
interface ForNode extends Node {
  iterable: Node & { lhs?: Node };
  body: Node[];
}
interface BinaryNode extends Node {
  operator: { value: string };
  left: Node;
  right: Node;
}
interface CallNode extends Node {
  callee: Node;
  args: Node[];
}
interface MemberNode extends Node {
  object: Node;
  property: Node;
  computed: boolean;
}
interface FilterNode extends Node {
  operand: Node;
  filter: IdentifierNode | CallNode;
}
interface FilterStatementNode extends Node {
  filter: IdentifierNode | CallNode;
  body: Node[];
}

type Arguments = [positional: LibraryValue[], keywords: Map<string, LibraryValue>];
/** The library's private methods this file relies on. */
interface Internals {
  evaluateArguments(args: Node[], env: Environment): Arguments;
  evaluateBlock(statements: Node[], env: Environment): LibraryValue;
}

/** Filters whose arguments decide how long their result is. */
const SIZED_FILTERS = new Set(['join', 'replace', 'indent', 'tojson', 'string']);

class CappedInterpreter extends Interpreter {
  private steps = 0;
  /** The loops being run, innermost last, with the length of the output of their rounds so far. */
  private readonly loops: { body: Node[]; output: number }[] = [];
  /** Bodies of macros and call blocks: each run is a call. */
  private readonly calledBodies = new WeakSet<Node[]>();

  constructor(
    env: Environment,
    private readonly caps: JinjaCaps,
  ) {
    super(env);
  }

  override evaluate(statement: LibraryNode | undefined, env: Environment): LibraryValue {
    if (statement === undefined) return super.evaluate(statement, env);
    const node = statement as Node;
    switch (node.type) {
      case HELD:
        return (node as Held).value;
      case 'For':
        return this.checked(this.loop(node as ForNode, env));
      case 'Macro':
      case 'CallStatement':
        this.calledBodies.add((node as unknown as { body: Node[] }).body);
        break;
      case 'BinaryExpression':
        return this.checked(this.binary(node as BinaryNode, env));
      case 'CallExpression':
        return this.checked(this.call(node as CallNode, env));
      case 'FilterExpression': {
        const f = node as FilterNode;
        return this.checked(this.filter(this.evaluate(f.operand as LibraryNode, env), f.filter, env));
      }
      case 'FilterStatement': {
        const f = node as FilterStatementNode;
        return this.checked(this.filter(this.block(f.body, env), f.filter, env));
      }
      case 'Identifier':
      case 'MemberExpression':
        return super.evaluate(statement, env); // a lookup makes nothing new
    }
    return this.checked(super.evaluate(statement, env));
  }

  /** Replaces the library's `evaluateBlock` (see the prototype assignment below). */
  block(statements: Node[], env: Environment): LibraryValue {
    if (this.calledBodies.has(statements)) this.step(1, 'a macro call');
    let out = '';
    for (const statement of statements) {
      const value = this.evaluate(statement as LibraryNode, env) as JinjaValue;
      if (value.type === 'NullValue' || value.type === 'UndefinedValue') continue;
      this.fitString(out.length + printedLength(value, this.caps.maxStringLength - out.length));
      out += value.toString();
    }
    const loop = this.loops.at(-1);
    if (loop?.body === statements) {
      loop.output += out.length;
      this.fitString(loop.output, 'the output of a loop');
    }
    return new StringValue(out);
  }

  private loop(node: ForNode, env: Environment): LibraryValue {
    const select = node.iterable.type === 'SelectExpression' ? node.iterable : undefined;
    let iterable = this.evaluate((select?.lhs ?? node.iterable) as LibraryNode, env) as JinjaValue;
    if (iterable.type === 'UndefinedValue') iterable = new ArrayValue([]) as JinjaValue;
    if (iterable.type === 'StringValue') {
      const text = iterable.value as string;
      this.step(text.length, 'a loop');
      iterable = new ArrayValue(Array.from(text, (c) => new StringValue(c))) as JinjaValue;
    } else {
      this.step(isList(iterable) ? iterable.value.length : sizeOfMapping(iterable), 'a loop');
    }
    const held = hold(iterable as LibraryValue) as unknown as Node;
    const rewritten = { ...node, iterable: select ? { ...select, lhs: held } : held };
    this.loops.push({ body: node.body, output: 0 });
    try {
      return super.evaluate(rewritten as unknown as LibraryNode, env);
    } finally {
      this.loops.pop();
    }
  }

  private binary(node: BinaryNode, env: Environment): LibraryValue {
    const op = node.operator.value;
    if (op !== '~' && op !== '+') return super.evaluate(node as unknown as LibraryNode, env);
    let left = this.evaluate(node.left as LibraryNode, env) as JinjaValue;
    let right = this.evaluate(node.right as LibraryNode, env) as JinjaValue;
    if (op === '~') {
      // jinja2 concatenates an undefined name as ""
      if (left.type === 'UndefinedValue') left = new StringValue('') as JinjaValue;
      if (right.type === 'UndefinedValue') right = new StringValue('') as JinjaValue;
    }
    if (op === '+' && isList(left) && isList(right)) {
      this.fitList(left.value.length + right.value.length);
    } else if (op === '~' || left.type === 'StringValue' || right.type === 'StringValue') {
      const budget = this.caps.maxStringLength;
      const l = joinedLength(left, budget);
      this.fitString(l + joinedLength(right, budget - l));
    }
    return super.evaluate({ ...node, left: hold(left as LibraryValue), right: hold(right as LibraryValue) } as unknown as LibraryNode, env);
  }

  /** A call; for `x.replace(...)` on a string, the length of the result is checked first. */
  private call(node: CallNode, env: Environment): LibraryValue {
    if (node.callee.type !== 'MemberExpression') return super.evaluate(node as unknown as LibraryNode, env);
    const callee = node.callee as MemberNode;
    // the library's order: the arguments, then the callee
    const [args, kwargs] = this.internals.evaluateArguments(node.args, env);
    const object = this.evaluate(callee.object as LibraryNode, env) as JinjaValue;
    let property = callee.property;
    let name = !callee.computed && property.type === 'Identifier' ? (property as IdentifierNode).value : undefined;
    if (callee.computed && property.type !== 'SliceExpression') {
      const evaluated = this.evaluate(property as LibraryNode, env) as JinjaValue;
      name = evaluated.type === 'StringValue' ? (evaluated.value as string) : undefined;
      property = hold(evaluated as LibraryValue) as unknown as Node;
    }
    if (object.type === 'StringValue' && name === 'replace') {
      this.fitReplace(object.value as string, args[0], args[1], args[2] ?? kwargs.get('count'));
    }
    const rewritten = { ...node, args: heldArguments(args, kwargs), callee: { ...callee, object: hold(object as LibraryValue), property } };
    return super.evaluate(rewritten as unknown as LibraryNode, env);
  }

  private filter(operand: LibraryValue, filter: IdentifierNode | CallNode, env: Environment): LibraryValue {
    const name = filter.type === 'Identifier' ? (filter as IdentifierNode).value : ((filter as CallNode).callee as IdentifierNode).value;
    let value = operand as JinjaValue;
    // jinja2 reads an undefined name as "" in filters
    if (value.type === 'UndefinedValue' && name !== 'default' && name !== 'tojson') value = new StringValue('') as JinjaValue;
    let applied: IdentifierNode | CallNode = filter;
    let args: Arguments = [[], new Map()];
    if (filter.type === 'CallExpression' && SIZED_FILTERS.has(name)) {
      args = this.internals.evaluateArguments((filter as CallNode).args, env);
      applied = { ...(filter as CallNode), args: heldArguments(...args) };
    }
    if (SIZED_FILTERS.has(name)) this.fitFilter(name, value, args);
    return super.evaluate({ type: 'FilterExpression', operand: hold(value as LibraryValue), filter: applied } as unknown as LibraryNode, env);
  }

  private fitFilter(name: string, value: JinjaValue, [args, kwargs]: Arguments): void {
    const budget = this.caps.maxStringLength;
    const arg = (i: number, key: string) => (args[i] ?? kwargs.get(key)) as JinjaValue | undefined;
    switch (name) {
      case 'tojson': {
        const indent = kwargs.get('indent') as JinjaValue | undefined;
        const width = indent?.type === 'IntegerValue' ? (indent.value as number) : 0;
        this.fitString(width, 'the indent of tojson');
        const separators = kwargs.get('separators') as JinjaValue | undefined;
        const [item, key] = separators && isList(separators) ? separators.value.map((s) => String(s.value)) : [];
        const ascii = kwargs.get('ensure_ascii') as JinjaValue | undefined;
        const layout: JsonLayout = {
          indent: width,
          itemSeparator: item ?? (width ? ',' : ', '),
          keySeparator: key ?? ': ',
          ensureAscii: ascii?.value === true,
          undefinedAsNull: true,
        };
        this.fitString(jsonLength(value, layout, 0, budget));
        return;
      }
      case 'string':
        if (value.type !== 'StringValue') this.fitString(jsonLength(value, PRINTED, 0, budget));
        return;
      case 'join': {
        const separator = arg(0, 'separator');
        const sep = separator?.type === 'StringValue' ? (separator.value as string).length : 0;
        if (value.type === 'StringValue') {
          const chars = Array.from(value.value as string).length;
          this.fitString(chars + Math.max(0, chars - 1) * sep);
        } else if (isList(value)) {
          this.fitString(joinLength(value.value, sep, budget));
        }
        return;
      }
      case 'indent': {
        if (value.type !== 'StringValue') return;
        const width = arg(0, 'width');
        const spaces = width === undefined ? 4 : width.type === 'IntegerValue' ? (width.value as number) : 0;
        this.fitString(spaces, 'the width of indent');
        this.fitString(indentedLength(value.value as string, spaces, Boolean(arg(1, 'first')?.value), Boolean(arg(2, 'blank')?.value)));
        return;
      }
      case 'replace':
        if (value.type === 'StringValue') this.fitReplace(value.value as string, args[0], args[1], arg(2, 'count'));
    }
  }

  private fitReplace(s: string, old: JinjaValue | undefined, replacement: JinjaValue | undefined, count: JinjaValue | undefined): void {
    const o = old;
    const r = replacement;
    if (o?.type !== 'StringValue' || r?.type !== 'StringValue') return; // the library refuses them
    const n = count?.type === 'IntegerValue' ? (count.value as number) : null;
    this.fitString(replacedLength(s, o.value as string, r.value as string, n));
  }

  private get internals(): Internals {
    return this as unknown as Internals;
  }

  private step(count: number, what: string): void {
    this.steps += count;
    const limit = this.caps.maxLoopIterations;
    if (this.steps > limit) {
      throw new CapExceeded('maxLoopIterations', limit, `${what} took the render past ${limit} loop iterations and macro calls`);
    }
  }

  private fitString(length: number, what = 'a string'): void {
    const limit = this.caps.maxStringLength;
    if (length > limit) throw new CapExceeded('maxStringLength', limit, `${what} would be longer than ${limit} characters`);
  }

  private fitList(length: number): void {
    const limit = this.caps.maxListLength;
    if (length > limit) throw new CapExceeded('maxListLength', limit, `a list would hold more than ${limit} items`);
  }

  /** A new string or list must fit its cap. */
  private checked(value: LibraryValue): LibraryValue {
    const v = value as JinjaValue;
    if (v.type === 'StringValue') this.fitString((v.value as string).length);
    else if (isList(v)) this.fitList(v.value.length);
    return value;
  }
}

// `evaluateBlock` is private in the library's typings; in its JavaScript it is a prototype method.
Object.defineProperty(CappedInterpreter.prototype, 'evaluateBlock', {
  value: CappedInterpreter.prototype.block,
  writable: true,
  configurable: true,
});

function sizeOfMapping(v: JinjaValue): number {
  return v.value instanceof Map ? v.value.size : 0;
}

/** Evaluated arguments as argument nodes: positional ones, then `key=value` ones. */
function heldArguments(args: LibraryValue[], kwargs: Map<string, LibraryValue>): Node[] {
  return [
    ...args.map((a) => hold(a) as unknown as Node),
    ...[...kwargs].map(([key, value]) => ({ type: 'KeywordArgumentExpression', key: { type: 'Identifier', value: key }, value: hold(value) })),
  ];
}

/** Python's `range`, refusing a list longer than the cap before building it. */
function cappedRange(limit: number) {
  return (...args: unknown[]): number[] => {
    if (args.length < 1 || args.length > 3 || !args.every((a) => Number.isSafeInteger(a))) {
      throw new Error('range() takes one to three integers');
    }
    const [start, stop, step] = (args.length === 1 ? [0, args[0], 1] : [args[0], args[1], args[2] ?? 1]) as number[] as [number, number, number];
    if (step === 0) throw new Error('range() step must not be zero');
    const length = Math.max(0, Math.ceil((stop - start) / step));
    if (length > limit) throw new CapExceeded('maxRangeLength', limit, `range() would make ${length} numbers, more than ${limit}`);
    return Array.from({ length }, (_, i) => start + i * step);
  };
}

function parseTemplate(source: string): LibraryNode {
  try {
    // jinja2's defaults: no trim_blocks, no lstrip_blocks
    return parse(tokenize(source, {})) as unknown as LibraryNode;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // the parser reads past its last token when a block is never closed
    const hint = error instanceof TypeError ? 'a block is not closed before the end of the template: ' : '';
    throw new TemplateSyntaxError(hint + message, { cause: error });
  }
}

/** Renders `source`; throws CapExceeded, TemplateSyntaxError, or the library's own errors. */
export function renderCapped(source: string, variables: Readonly<Record<string, unknown>>, caps: JinjaCaps): string {
  const program = parseTemplate(source);
  const globals = new Environment();
  globals.set('true', true);
  globals.set('false', false);
  globals.set('none', null);
  globals.set('True', true);
  globals.set('False', false);
  globals.set('None', null);
  globals.set('range', cappedRange(caps.maxRangeLength));
  globals.set('raise_exception', (message: unknown) => {
    throw new Error(String(message));
  });
  const env = new Environment(globals);
  for (const [name, value] of Object.entries(variables)) {
    env.variables.delete(name); // a variable may shadow `namespace`
    env.set(name, value);
  }
  const result = new CappedInterpreter(env, caps).run(program as Parameters<Interpreter['run']>[0]) as JinjaValue;
  return String(result.value);
}
