/**
 * Loading a RAGFlow DSL: checks its shape, resolves every component against the registry and
 * compiles it into an immutable `Workflow` the engine runs. All problems are collected and
 * thrown together as one `DslValidationError`, each naming its component and field.
 *
 * @example
 *   const workflow = compileWorkflow(JSON.parse(text), builtinComponents);
 *   const canvas = Canvas.create(workflow);
 */
import { z } from 'zod';
import type { CheckScope, ComponentDefinition, ComponentRegistry } from './component';
import { type DslProblem, DslValidationError } from './errors';
import { findReferences, isRecord } from './references';

/** Limits that keep a hostile DSL from costing more than a clear error. */
export const DSL_LIMITS = {
  maxComponents: 500,
  maxParamDepth: 32,
  maxScopeDepth: 8,
} as const;

const ID_PATTERN = /^[A-Za-z0-9_:\-]{1,128}$/;
const RESERVED_IDS = new Set(['__proto__', 'constructor', 'prototype']);

export interface ExceptionPolicy {
  method: 'goto' | 'comment' | null;
  goto: readonly string[];
  defaultValue: string | null;
}

export interface WorkflowNode {
  readonly id: string;
  readonly componentName: string;
  readonly displayName: string;
  readonly definition: ComponentDefinition<any>;
  readonly params: unknown;
  readonly downstream: readonly string[];
  readonly parentId: string | undefined;
  readonly exception: ExceptionPolicy;
  /** For containers: the body node run at the start of every round. */
  readonly scopeEntryId: string | undefined;
}

export interface Workflow {
  readonly nodes: ReadonlyMap<string, WorkflowNode>;
  readonly entryId: string;
  readonly globals: Readonly<Record<string, unknown>>;
  readonly variables: Readonly<Record<string, unknown>>;
  node(id: string): WorkflowNode;
  /** Whether `to` can be reached from `from` along edges (downstream, branches, error gotos). */
  reaches(from: string, to: string): boolean;
  /** The most exchanges of conversation any component reads (0: none needs history). */
  readonly historyWindow: number;
  /** Whether `id` is inside the body of `containerId`, at any depth. */
  isInside(id: string, containerId: string): boolean;
  /** The containers `id` is inside, outermost first. */
  containersOf(id: string): string[];
}

const entrySchema = z.lazy(() => z.looseObject({
  obj: z.looseObject({
    component_name: z.string().min(1),
    params: z.record(z.string(), z.unknown()).nullish(),
  }),
  downstream: z.array(z.string()).nullish(),
  upstream: z.array(z.string()).nullish(),
  parent_id: z.string().nullish(),
}));

const exceptionSchema = z.lazy(() => z.looseObject({
  exception_method: z.union([z.enum(['goto', 'comment']), z.literal(''), z.literal('null')]).nullish(),
  exception_goto: z.union([z.array(z.string()), z.string()]).nullish(),
  exception_default_value: z.union([z.string(), z.number(), z.boolean()]).nullish(),
}));

/** Compiles a DSL, or throws a `DslValidationError` listing every problem found. */
export function compileWorkflow(
  dsl: unknown,
  registry: ComponentRegistry,
  limits: { maxComponents?: number } = {},
): Workflow {
  const maxComponents = limits.maxComponents ?? DSL_LIMITS.maxComponents;
  const problems: DslProblem[] = [];
  if (!isRecord(dsl)) throw new DslValidationError([{ message: 'the DSL must be a JSON object' }]);
  const rawComponents = dsl.components;
  if (!isRecord(rawComponents) || Object.keys(rawComponents).length === 0) {
    throw new DslValidationError([
      { field: 'components', message: 'must be an object with at least one component' },
    ]);
  }
  const entries = Object.entries(rawComponents);
  if (entries.length > maxComponents) {
    throw new DslValidationError([{ field: 'components', message: `at most ${maxComponents} components are allowed` }]);
  }

  const displayNames = readDisplayNames(dsl.graph);
  const parsed = new Map<string, ParsedEntry>();
  const unsupported = new Set<string>();

  for (const [id, raw] of entries) {
    if (!ID_PATTERN.test(id) || RESERVED_IDS.has(id)) {
      problems.push({
        component_id: id.slice(0, 128),
        message: 'component ids are 1-128 characters of letters, digits, "_", ":" and "-"',
      });
      continue;
    }
    const entry = entrySchema.safeParse(raw);
    if (!entry.success) {
      for (const issue of entry.error.issues) {
        problems.push({ component_id: id, field: issue.path.join('.'), message: issue.message });
      }
      continue;
    }
    const name = entry.data.obj.component_name;
    const definition = registry.get(name);
    if (!definition || definition.refused !== undefined) {
      unsupported.add(name);
      problems.push({
        component_id: id,
        field: 'obj.component_name',
        message: `unsupported component "${name}"${definition?.refused ? `: ${definition.refused}` : ''}`,
      });
      continue;
    }
    const rawParams = entry.data.obj.params ?? {};
    const depth = nestingDepth(rawParams, DSL_LIMITS.maxParamDepth + 1);
    if (depth > DSL_LIMITS.maxParamDepth) {
      problems.push({
        component_id: id,
        field: 'obj.params',
        message: `nested deeper than ${DSL_LIMITS.maxParamDepth} levels`,
      });
      continue;
    }
    const params = definition.params.safeParse(rawParams);
    const exception = exceptionSchema.safeParse(rawParams);
    for (const result of [params, exception]) {
      for (const issue of result.error?.issues ?? []) {
        problems.push({ component_id: id, field: ['obj', 'params', ...issue.path].join('.'), message: issue.message });
      }
    }
    parsed.set(id, {
      id,
      name,
      definition,
      rawParams,
      params: params.success ? params.data : undefined,
      paramsValid: params.success && exception.success,
      exception: exception.success ? toPolicy(exception.data) : { method: null, goto: [], defaultValue: null },
      downstream: [...new Set(entry.data.downstream ?? [])],
      parentId: entry.data.parent_id || undefined,
      displayName: displayNames.get(id) ?? id,
    });
  }

  if (unsupported.size > 0) {
    problems.unshift({
      field: 'components',
      message: `unsupported components: ${[...unsupported].sort().join(', ')}`,
    });
  }

  checkStructure(parsed, problems);
  if (problems.length > 0) throw new DslValidationError(problems);
  return buildWorkflow(parsed, dsl);
}

interface ParsedEntry {
  id: string;
  name: string;
  definition: ComponentDefinition<any>;
  rawParams: Record<string, unknown>;
  params: unknown;
  paramsValid: boolean;
  exception: ExceptionPolicy;
  downstream: string[];
  parentId: string | undefined;
  displayName: string;
}

function toPolicy(data: z.output<typeof exceptionSchema>): ExceptionPolicy {
  const method = data.exception_method === 'goto' || data.exception_method === 'comment'
    ? data.exception_method
    : null;
  const goto = typeof data.exception_goto === 'string'
    ? [data.exception_goto].filter(Boolean)
    : (data.exception_goto ?? []);
  const value = data.exception_default_value;
  return {
    method,
    goto: [...new Set(goto)],
    defaultValue: value === null || value === undefined || value === '' ? null : String(value),
  };
}

function checkStructure(parsed: Map<string, ParsedEntry>, problems: DslProblem[]): void {
  const childrenOf = new Map<string, string[]>();
  for (const e of parsed.values()) {
    if (e.parentId === undefined) continue;
    const list = childrenOf.get(e.parentId) ?? [];
    list.push(e.id);
    childrenOf.set(e.parentId, list);
  }

  const entries = [...parsed.values()].filter((e) => e.definition.entry);
  if (entries.length === 0) problems.push({ message: 'the workflow has no Begin component' });
  if (entries.length > 1) {
    problems.push({ message: `only one Begin component is allowed, found: ${entries.map((e) => e.id).join(', ')}` });
  }

  for (const e of parsed.values()) {
    const at = (field: string, message: string) => problems.push({ component_id: e.id, field, message });

    for (const target of e.downstream) {
      if (!parsed.has(target)) at('downstream', `refers to a missing component "${target}"`);
      else if (parsed.get(target)?.parentId !== e.parentId) {
        at('downstream', `"${target}" is in another scope (a different parent_id)`);
      }
    }
    if (e.paramsValid) {
      for (const target of e.definition.branchTargets?.(e.params) ?? []) {
        if (!parsed.has(target)) at('obj.params', `branches to a missing component "${target}"`);
        else if (parsed.get(target)?.parentId !== e.parentId) {
          at('obj.params', `branches to "${target}" in another scope (a different parent_id)`);
        }
      }
    }
    for (const target of e.exception.goto) {
      if (!parsed.has(target)) at('obj.params.exception_goto', `refers to a missing component "${target}"`);
    }
    if (e.exception.method === 'goto' && e.exception.goto.length === 0 && e.exception.defaultValue === null) {
      at('obj.params.exception_goto', 'the goto exception method needs at least one target');
    }

    if (e.definition.entry && e.parentId !== undefined) at('parent_id', 'Begin cannot be inside a container');
    if (e.parentId !== undefined) {
      const parent = parsed.get(e.parentId);
      if (!parent) at('parent_id', `refers to a missing component "${e.parentId}"`);
      else if (!parent.definition.container) at('parent_id', `"${e.parentId}" is not a container (Iteration or Loop)`);
    } else if (e.definition.scopeEntry) {
      at('parent_id', `a ${e.name} must be inside its container`);
    }
    if (e.definition.container) {
      const starts = (childrenOf.get(e.id) ?? []).filter((c) => parsed.get(c)?.definition.scopeEntry);
      if (starts.length !== 1) {
        at('components', `a container needs exactly one start node among its children, found ${starts.length}`);
      }
    }
    if (scopeDepth(e, parsed) > DSL_LIMITS.maxScopeDepth) {
      at('parent_id', `containers nest deeper than ${DSL_LIMITS.maxScopeDepth} levels (or form a cycle)`);
    }

    for (const { path, text } of stringsIn(e.rawParams)) {
      for (const ref of findReferences(text)) {
        if (ref.kind === 'component' && !parsed.has(ref.componentId)) {
          at(`obj.params.${path}`, `references a missing component "${ref.componentId}" in {${ref.raw}}`);
        }
      }
    }

    if (e.paramsValid && e.definition.check) {
      const scope = checkScope(e.id, parsed, childrenOf);
      for (const p of e.definition.check(e.params, scope)) problems.push({ component_id: e.id, ...p });
    }
  }
}

function checkScope(
  componentId: string,
  parsed: Map<string, ParsedEntry>,
  childrenOf: Map<string, string[]>,
): CheckScope {
  return {
    componentId,
    has: (id) => parsed.has(id),
    componentName: (id) => parsed.get(id)?.name,
    parentOf: (id) => parsed.get(id)?.parentId,
    childrenOf: (id) => childrenOf.get(id) ?? [],
  };
}

function scopeDepth(e: ParsedEntry, parsed: Map<string, ParsedEntry>): number {
  let depth = 0;
  let parent = e.parentId;
  while (parent !== undefined && depth <= DSL_LIMITS.maxScopeDepth) {
    depth++;
    parent = parsed.get(parent)?.parentId;
  }
  return depth;
}

function buildWorkflow(parsed: Map<string, ParsedEntry>, dsl: Record<string, unknown>): Workflow {
  const nodes = new Map<string, WorkflowNode>();
  for (const e of parsed.values()) {
    const scopeEntryId = e.definition.container
      ? [...parsed.values()].find((c) => c.parentId === e.id && c.definition.scopeEntry)?.id
      : undefined;
    nodes.set(e.id, {
      id: e.id,
      componentName: e.name,
      displayName: e.displayName,
      definition: e.definition,
      params: e.params,
      downstream: e.downstream,
      parentId: e.parentId,
      exception: e.exception,
      scopeEntryId,
    });
  }
  const entryId = [...nodes.values()].find((n) => n.definition.entry)?.id as string;

  const edges = new Map<string, string[]>();
  for (const n of nodes.values()) {
    const extra = n.definition.branchTargets?.(n.params) ?? [];
    edges.set(n.id, [...new Set([...n.downstream, ...extra, ...n.exception.goto])]);
  }
  const reachCache = new Map<string, Set<string>>();
  const reachableFrom = (from: string): Set<string> => {
    let seen = reachCache.get(from);
    if (seen) return seen;
    seen = new Set<string>();
    const stack = [...(edges.get(from) ?? [])];
    while (stack.length > 0) {
      const id = stack.pop() as string;
      if (seen.has(id)) continue;
      seen.add(id);
      stack.push(...(edges.get(id) ?? []));
    }
    reachCache.set(from, seen);
    return seen;
  };

  const historyWindow = Math.max(0, ...[...nodes.values()].map((n) => n.definition.historyWindow?.(n.params) ?? 0));
  return {
    nodes,
    entryId,
    historyWindow,
    globals: isRecord(dsl.globals) ? dsl.globals : {},
    variables: isRecord(dsl.variables) ? dsl.variables : {},
    node(id) {
      const n = nodes.get(id);
      if (!n) throw new Error(`unknown component ${id}`);
      return n;
    },
    reaches: (from, to) => reachableFrom(from).has(to),
    isInside(id, containerId) {
      let parent = nodes.get(id)?.parentId;
      while (parent !== undefined) {
        if (parent === containerId) return true;
        parent = nodes.get(parent)?.parentId;
      }
      return false;
    },
    containersOf(id) {
      const out: string[] = [];
      for (let parent = nodes.get(id)?.parentId; parent !== undefined; parent = nodes.get(parent)?.parentId) out.unshift(parent);
      return out;
    },
  };
}

function readDisplayNames(graph: unknown): Map<string, string> {
  const names = new Map<string, string>();
  if (!isRecord(graph) || !Array.isArray(graph.nodes)) return names;
  for (const node of graph.nodes) {
    if (!isRecord(node) || typeof node.id !== 'string') continue;
    const data = node.data;
    if (isRecord(data) && typeof data.name === 'string' && data.name !== '') names.set(node.id, data.name);
  }
  return names;
}

/** Depth of nested arrays/objects, counting stops at `limit` so hostile input stays cheap. */
function nestingDepth(value: unknown, limit: number): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    if (d > max) max = d;
    if (max >= limit) return max;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** Every string inside params with its dotted path, for reference checks. */
function* stringsIn(value: unknown, path = ''): Generator<{ path: string; text: string }> {
  if (typeof value === 'string') {
    yield { path, text: value };
  } else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) yield* stringsIn(v, path ? `${path}.${k}` : k);
  }
}
