/**
 * The one interface every tool an Agent can call implements: sub-Agents and retrieval today;
 * built-in web and data tools, MCP and tool approvals later. A tool describes itself to the
 * model (name, description, JSON-schema parameters) and answers a call with an outcome:
 * a result, a typed error, or a suspension (a person must decide before it can go on).
 *
 * ```ts
 * const clock: Tool = {
 *   name: 'clock',
 *   description: 'The current time in UTC, as ISO 8601.',
 *   parameters: { type: 'object', properties: {} },
 *   timeoutMs: 1000,
 *   async invoke() {
 *     return { kind: 'result', content: new Date().toISOString() };
 *   },
 * };
 * ```
 */
import type { TokenUsage } from '../canvas/component';
import type { ReferenceChunk, ReferenceDocument } from '../canvas/run-references';
import type { RunKnowledge } from '../knowledge/types';
import type { ModelResolver } from '../llm/models';
import type { RunMcp } from '../mcp/types';
import type { SsrfGuard } from '../outbound/ssrf';
import type { ToolError, ToolTransientError } from './errors';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * The tool did its work. `content` goes back to the model (RAGFlow's `formalized_content`);
 * `data` is the structured answer (RAGFlow's `json` output: the results as parsed), kept in
 * the call's record and, for a tool placed on the canvas, its `json` output.
 */
export interface ToolResult {
  kind: 'result';
  content: string;
  data?: unknown;
  /**
   * The tool's outputs when it is placed on the canvas, in RAGFlow's names, for tools whose
   * outputs are not `formalized_content` and `json` (Email's `success`).
   */
  outputs?: Record<string, unknown>;
  /**
   * What the result was found in (retrieved chunks and their documents): the Agent adds them
   * to the pass's references (lib/canvas/run-references), which `message_end` carries.
   */
  references?: ToolReferences;
}

export interface ToolReferences {
  chunks: readonly ReferenceChunk[];
  doc_aggs: readonly ReferenceDocument[];
}

/**
 * The tool cannot go on before a person decides (an approval). `state` is what the tool needs
 * to continue later and is stored with the run, so it must survive JSON; `prompt` is what the
 * person is asked. An Agent does not resume suspensions yet: it fails with `tool_suspended`.
 */
export interface ToolSuspension {
  kind: 'suspend';
  state: JsonValue;
  prompt: string;
}

/**
 * The tool failed. Returning this is the same as throwing `error`: a `ToolTransientError`
 * (or any `TransientError`) fails the turn as `unavailable`, anything else is told to the model.
 */
export interface ToolFailure {
  kind: 'error';
  error: ToolError | ToolTransientError;
}

export type ToolOutcome = ToolResult | ToolSuspension | ToolFailure;

/** What a tool may use of the run's services; the host may leave any of them out. */
export interface ToolServices {
  readonly models?: ModelResolver;
  /** The outbound HTTP guard: every URL a tenant supplies goes through it. */
  readonly guard?: SsrfGuard;
  /** Secret values by name (`{secret.NAME}`), resolved at call time, never logged. */
  readonly secret?: (name: string) => string | undefined | Promise<string | undefined>;
  /** The run's tenant's knowledge bases (lib/knowledge), for retrieval tools. */
  readonly knowledge?: RunKnowledge;
  /** The run's tenant's MCP servers (lib/mcp). */
  readonly mcp?: RunMcp;
}

/** What a tool sees of the run during one call. Small on purpose. */
export interface ToolContext {
  /** Aborted when the call times out or the turn is cancelled; pass it to every request. */
  readonly signal: AbortSignal;
  readonly services: ToolServices;
  /** The Agent component in the workflow that made the call. */
  readonly componentId: string;
  /**
   * The call's position among the calls this Agent made in this invocation (0, 1, ...), in
   * the order the model asked for them; with `path`, it names the call deterministically.
   */
  readonly ordinal: number;
  /** Ordinals of the sub-Agent calls this call is nested in; empty for the Agent's own calls. */
  readonly path: readonly number[];
  /**
   * Resolves after `ms` on the registry's timer (tests fire it by hand) and rejects when the
   * call ends first (its timeout, the turn's cancel): the backoff between retries. `callTool`
   * provides it; a host that calls a tool directly may leave it out.
   */
  wait?(ms: number): Promise<void>;
  /** Counts model tokens towards the turn, for tools that call a model. */
  recordUsage(usage: TokenUsage): void;
  /**
   * The raw value of one of the run's variables (`begin@kb`, `{sys.query}`), for tools whose
   * params name them; absent where the caller has no run to read.
   */
  get?(reference: string): Promise<unknown>;
}

export interface Tool {
  /** Shown to the model (the Agent adds `_<index>` to keep names unique); letters, digits, `_`, `-`. */
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object the model writes. */
  readonly parameters: Record<string, unknown>;
  /** How long one call may take, in ms. @default the registry's `defaultTimeoutMs` */
  readonly timeoutMs?: number;
  /**
   * Its work is calls of its own that the turn records (a sub-Agent's rounds): a resumed turn
   * runs it again, those calls answered from their records, rather than answer it from its own.
   */
  readonly nested?: boolean;
  /**
   * What besides the arguments decides the result (a retrieval's knowledge bases and limits):
   * part of the request an Agent records for the call, so that a replay against a version that
   * changes them makes the call again rather than answer it from the record.
   */
  readonly settings?: JsonValue;
  /** `args` is the JSON object the model wrote (not validated against `parameters`). */
  invoke(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolOutcome>;
}
