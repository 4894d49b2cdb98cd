/**
 * The tools a runtime offers to Agents, by kind: an explicit map the runtime builds (never a
 * directory scan), handed to the run in its services (`services({ tools })`). A DSL's Agent
 * declares its tools as RAGFlow does — `{component_name, name, params}` entries — and each
 * entry's `component_name` is looked up here; sub-Agents (`component_name: "Agent"`) are the
 * Agent's own kind and need no entry.
 *
 * ```ts
 * const lookup: ToolKind<{ table: string }> = {
 *   name: 'Lookup',
 *   params: z.object({ table: z.string() }),
 *   create: (entry) => lookupTool(entry.params.table),
 * };
 * const tools = createToolRegistry([lookup], { defaultTimeoutMs: 10_000 });
 * const components = withComponents(createAgent(tools)); // the loader accepts Lookup entries
 * const run = services({ models, guard, secret, tools }); // the Agent calls them
 * ```
 */
import type { z } from 'zod';
import { crawlerTool } from './crawler';
import { emailTool } from './email';
import type { ToolService } from './service-names';
import { githubTool } from './github';
import { googleTool } from './google';
import { arxivTool } from './arxiv';
import { pubmedTool } from './pubmed';
import { retrievalTool } from './retrieval';
import { searxngTool } from './searxng';
import { tavilyTools } from './tavily';
import type { Tool, ToolOutcome } from './types';
import { wikipediaTool } from './wikipedia';

/** One tool entry of an Agent's DSL, its params validated by its kind. */
export interface ToolEntry<P = unknown> {
  /** The kind: `component_name` in the DSL. */
  readonly component_name: string;
  /** The name the DSL gives it (RAGFlow shows it in the canvas). */
  readonly name: string;
  readonly id?: string | null;
  readonly params: P;
}

/** How to build tools of one kind from DSL entries. */
export interface ToolKind<P = unknown> {
  /** `component_name` of the entries it builds (`Retrieval`, `TavilySearch`, ...). */
  readonly name: string;
  /** Checks and normalises an entry's `params` when the DSL is loaded. */
  readonly params: z.ZodType<P>;
  /** The tool for one entry; called once per Agent invocation, so it may hold per-run state. */
  create(entry: ToolEntry<P>): Tool;
  /**
   * Params that hold a credential: empty or `{secret.NAME}` in a DSL, never the value. When a
   * workflow is imported, a value found there is moved into the tenant's secrets under
   * `secret` (or a name derived from it) and replaced by its reference.
   */
  readonly credentials?: readonly ToolCredential[];
  /**
   * The function's arguments a tool placed on the canvas takes when its params leave them out
   * (RAGFlow's `meta.parameters[*].default`, e.g. `query: "{sys.query}"`).
   */
  readonly canvasDefaults?: Readonly<Record<string, unknown>>;
}

/** A credential param of a tool kind and the tenant secret it means when left empty. */
export interface ToolCredential {
  readonly param: string;
  readonly secret: string;
}

/** What one call is, as the call hook sees it. */
export interface ToolCallInfo {
  readonly componentId: string;
  readonly path: readonly number[];
  readonly ordinal: number;
  /** The tool's name as the model saw it. */
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/**
 * Wraps every tool call: the seam for call records (and later approvals). It may run the call
 * (`run()`, which applies the timeout) and record the outcome, or answer without running it.
 * Whatever it returns is classified like the tool's own outcome. The calls a resumed async
 * turn answers from its checkpoint's records never reach it: it saw them when they were made.
 */
export type ToolCallHook = (call: ToolCallInfo, run: () => Promise<ToolOutcome>) => Promise<ToolOutcome>;

/** Arms a timer and returns its cancel function; injectable so tests never wait. */
export type ToolTimer = (ms: number, onTimeout: () => void) => () => void;

export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

export const systemTimer: ToolTimer = (ms, onTimeout) => {
  const timer = setTimeout(onTimeout, ms);
  return () => clearTimeout(timer);
};

export interface ToolRegistry {
  /** The kind for an entry's `component_name`, if this registry has it. */
  kind(name: string): ToolKind<any> | undefined;
  /** Names of the kinds, in registration order. */
  readonly kinds: readonly string[];
  /** For tools that set no `timeoutMs`. */
  readonly defaultTimeoutMs: number;
  readonly timer: ToolTimer;
  readonly hook?: ToolCallHook;
}

export interface ToolRegistryOptions {
  /** @default DEFAULT_TOOL_TIMEOUT_MS (30 s) */
  defaultTimeoutMs?: number;
  /** Injectable for tests. @default setTimeout-based */
  timer?: ToolTimer;
  /** @default none: calls run as they are */
  hook?: ToolCallHook;
}

export function createToolRegistry(kinds: readonly ToolKind<any>[], options: ToolRegistryOptions = {}): ToolRegistry {
  const byName = new Map<string, ToolKind<any>>();
  for (const k of kinds) {
    if (k.name === 'Agent') throw new Error('"Agent" is the kind of sub-Agents, which every Agent provides');
    byName.set(k.name, k);
  }
  return {
    kind: (name) => byName.get(name),
    kinds: [...byName.keys()],
    defaultTimeoutMs: options.defaultTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    timer: options.timer ?? systemTimer,
    ...(options.hook ? { hook: options.hook } : {}),
  };
}

/**
 * The kinds Easel ships (sub-Agents besides, which every Agent provides), each talking to its
 * service's public API; a runtime with other endpoints builds its own (`builtinToolKindsWith`).
 */
export const builtinToolKinds: readonly ToolKind<any>[] = builtinToolKindsWith();

/** Where the built-in kinds send requests, by service (`EASEL_TOOL_<NAME>_BASE_URL`). */
export type ToolBaseUrls = Partial<Record<ToolService, string>>;

/** The built-in kinds with the operator's settings. */
export function builtinToolKindsWith(options: { baseUrls?: ToolBaseUrls } = {}): ToolKind<any>[] {
  const base = (service: ToolService) => (options.baseUrls?.[service] ? { baseUrl: options.baseUrls[service] } : {});
  return [
    retrievalTool,
    ...tavilyTools(base('TAVILY')),
    googleTool(base('GOOGLE')),
    searxngTool(),
    githubTool(base('GITHUB')),
    wikipediaTool(base('WIKIPEDIA')),
    arxivTool(base('ARXIV')),
    pubmedTool(base('PUBMED')),
    crawlerTool(),
    emailTool(),
  ];
}

export const builtinTools: ToolRegistry = createToolRegistry(builtinToolKinds);
