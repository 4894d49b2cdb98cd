/**
 * Agent: an LLM that may call tools, for up to `max_rounds` rounds of tool calls, then
 * answers. Its tools are the entries of its `tools` param: sub-Agents (each its own model,
 * prompt and tools; see lib/tools/sub-agent) and kinds of a tool registry (lib/tools/registry):
 * the loader accepts the kinds of the registry the Agent was created with, and a run calls
 * them through the registry in its services, else that one. Its `mcp` entries name servers of
 * the tenant's MCP registry (`services.mcp`), their tools bound after the others (lib/tools/mcp),
 * one session per server for the whole invocation, closed when it ends. Calls go natively
 * through the provider's function calling. Entries of other kinds are refused at load.
 *
 * Every round's text reaches a downstream Message live; `use_tools` records each call made.
 * The files it is shown (as LLM's) stay in its prompt for every round. Chunks its tools
 * retrieve join the pass's references; with `cite` (on by default) it is asked to cite them.
 *
 * Each model round and tool call, also a sub-Agent's, is recorded and then `callCompleted`:
 * an async turn checkpoints there. A resumed turn runs the interrupted Agent again, and the
 * rounds and calls it had completed are answered from their records (`recordedCall`): the
 * model and the tools are not called again, and a replayed round's text comes out as it was,
 * in one piece. A sub-Agent is run again rather than answered whole, so that its own calls
 * are replayed and recorded in turn.
 */
import { z } from 'zod';
import type { CompletedCall } from '../canvas/calls';
import { type ComponentContext, type ComponentDefinition, type ComponentRegistry, defineComponent } from '../canvas/component';
import { PauseRequest } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { TextStream } from '../canvas/text-stream';
import type { ChatEvent, ChatMessage, ChatModel, ChatOptions, ToolCall, ToolSpec, Usage } from '../llm/types';
import { callTool, type SettledOutcome } from '../tools/call';
import { ToolError, ToolSuspendedError, ToolUnavailableError } from '../tools/errors';
import { customHeaderSchema, mcpEntrySchema, McpSessions, modelName } from '../tools/mcp';
import { refusalOf } from '../tools/refused';
import { builtinTools, type ToolEntry, type ToolRegistry } from '../tools/registry';
import { subAgentTool } from '../tools/sub-agent';
import type { Tool, ToolContext, ToolReferences, ToolServices } from '../tools/types';
import {
  DEFAULT_HISTORY_WINDOW,
  checkFilesVariable,
  llmParamsShape,
  promptMessages,
  samplingOptions,
  schemaInstructions,
  structuredAnswer,
  structuredSchema,
  modelCallRequest,
  recordModelCall,
} from './llm-params';
import { citationPrompt } from '../knowledge/format';
import { type ApprovalParam, approvalParam, decide, needsApproval, rejection } from './agent-approvals';
import { citationInstructions, keepCited, wantsCitations } from './citations';
import { referencesForRecord, referencesFromRecord } from './recorded-references';
import { type ComponentServices, mcpOf, modelsOf, toolsOf } from './services';

export const DEFAULT_MAX_ROUNDS = 5;
/** Sub-agents within sub-agents, at most this deep. */
export const MAX_AGENT_DEPTH = 3;
/** The kind of a sub-Agent entry; every Agent provides it, whatever its registry. */
export const SUB_AGENT_KIND = 'Agent';

export interface AgentParams extends z.output<ReturnType<typeof buildBaseAgentShape>> {
  tools: AgentToolEntry[];
}

/** A tool entry; `params` is `AgentParams` for a sub-Agent, else what its kind's schema gave. */
export interface AgentToolEntry extends ToolEntry {
  readonly params: unknown;
}

// built on first use (memoized): a cold start that runs no Agent does not construct it
let baseAgent: ReturnType<typeof buildBaseAgentShape> | undefined;
const baseAgentShape = () => (baseAgent ??= buildBaseAgentShape());
function buildBaseAgentShape() {
  return z.looseObject({
    ...llmParamsShape(),
    max_rounds: z.number().int().min(0).max(20).nullish().transform((r) => r ?? DEFAULT_MAX_ROUNDS),
    description: z.string().nullish(),
    user_prompt: z.string().nullish(),
    mcp: z
      .array(mcpEntrySchema)
      .nullish()
      .transform((m) => m ?? []),
    /** Sent to its MCP servers besides their own headers (RAGFlow's `custom_header`). */
    custom_header: customHeaderSchema,
    /** Easel's addition: the tool calls a person approves first (agent-approvals.ts). */
    approval: approvalParam,
  });
}

/** The params schema of an Agent whose tool entries may be sub-Agents or kinds of `tools`. */
function agentParamsFor(tools: ToolRegistry): z.ZodType<AgentParams> {
  const known = [SUB_AGENT_KIND, ...tools.kinds];
  const self: z.ZodType<AgentParams> = z.lazy(() => baseAgentShape().extend({
    tools: z
      .array(
        z.looseObject({
          component_name: z.string(),
          name: z.string().min(1).max(64),
          id: z.string().nullish(),
          params: z.unknown(),
        }),
      )
      .nullish()
      .transform((t) => t ?? [])
      .superRefine((entries, issue) => {
        const unsupported = [...new Set(entries.map((t) => t.component_name).filter((n) => !known.includes(n)))];
        if (unsupported.length > 0) issue.addIssue({ code: 'custom', message: unsupportedToolsMessage(unsupported, known, tools.kinds.length === 0) });
      })
      .transform((entries, issue) =>
        entries.map((entry, i): AgentToolEntry => {
          const schema = entry.component_name === SUB_AGENT_KIND ? self : tools.kind(entry.component_name)?.params;
          if (!schema) return entry;
          const parsed = schema.safeParse(entry.params ?? {});
          if (parsed.success) return { ...entry, params: parsed.data };
          for (const problem of parsed.error.issues) {
            issue.issues.push({ code: 'custom', message: problem.message, input: entry.params, path: [i, 'params', ...problem.path] });
          }
          return entry;
        }),
      ),
  }) as unknown as z.ZodType<AgentParams>);
  return self;
}

/** Names the kinds, says why Easel refuses those RAGFlow has, and how to import without them. */
function unsupportedToolsMessage(unsupported: readonly string[], known: readonly string[], subAgentsOnly: boolean): string {
  const supported = subAgentsOnly ? 'only sub-Agents are supported as tools' : `supported: ${known.join(', ')}`;
  const reasons = unsupported.flatMap((kind) => {
    const reason = refusalOf(kind);
    return reason ? [` ${kind}: ${reason}.`] : [];
  });
  const hint = reasons.length > 0 ? ' An import with drop_unsupported_tools leaves them out and reports what it dropped.' : '';
  return `unsupported tool kinds: ${unsupported.join(', ')} (${supported}).${reasons.join('')}${hint}`;
}

function isSubAgent(entry: AgentToolEntry): entry is AgentToolEntry & ToolEntry<AgentParams> {
  return entry.component_name === SUB_AGENT_KIND;
}

/**
 * The Agent component for a tool registry: the loader accepts the entries of its kinds, and a
 * run calls them through the registry in its services (`services({ tools })`), else this one.
 */
export function createAgent(tools: ToolRegistry = builtinTools): ComponentDefinition<AgentParams> {
  const definition = defineComponent({
    name: 'Agent',
    external: true,
    params: agentParamsFor(tools),
    defaultOutput: 'content',
    historyWindow: (p) => agentWindow(p),
    check(p, scope) {
      const depth = toolDepth(p);
      return [
        ...(depth > MAX_AGENT_DEPTH ? [{ field: 'obj.params.tools', message: `sub-agents nest ${depth} deep; at most ${MAX_AGENT_DEPTH} levels are allowed` }] : []),
        ...checkFilesVariable(p, scope),
      ];
    },
    invoke: (p, ctx) => invokeAgent(p, ctx, toolsOf(ctx) ?? tools),
  });
  loaderTools.set(definition, tools);
  return definition;
}

/** The tool registry each Agent definition loads entries with. */
const loaderTools = new WeakMap<ComponentDefinition<any>, ToolRegistry>();

/**
 * The tool kinds a component registry's Agent accepts (its loader's registry): what an import
 * checks tool entries and their credentials against. Undefined when the Agent is not one of
 * `createAgent`'s.
 */
export function agentToolRegistry(components: ComponentRegistry): ToolRegistry | undefined {
  const definition = components.get(SUB_AGENT_KIND);
  return definition ? loaderTools.get(definition) : undefined;
}

export const agent = createAgent();

async function invokeAgent(p: AgentParams, ctx: ComponentContext, registry: ToolRegistry) {
  const model = modelsOf(ctx).resolve(p.llm_id);
  const schema = structuredSchema(p);
  if (schema && p.tools.length === 0 && p.mcp.length === 0) {
    const citing = wantsCitations(p, ctx);
    const { text, structured } = await structuredAnswer(model, await promptMessages(p, ctx, [...citationInstructions(citing), schemaInstructions(schema)]), p, ctx);
    if (citing) keepCited(ctx, text);
    return { outputs: { content: text, structured } };
  }
  const messages = await promptMessages(p, ctx);
  const trace: ToolTrace[] = [];
  const run = () => {
    const mcp = new McpSessions(() => mcpOf(ctx), { signal: ctx.signal, headers: p.custom_header });
    return closingMcp(runRounds(model, messages, p, { ctx, registry, signal: ctx.signal, path: [], next: 0, mcp, nested: new Map() }, trace), mcp);
  };
  // not streamed when an approval may pause it: a round's text comes before the calls that end it,
  // so text shown live could belong to a turn that pauses (docs/tools.md, approvals)
  if (!schema && ctx.downstreamStreams && !ctx.handlesErrors && !asksApproval(p)) {
    const stream = new TextStream(run());
    return { outputs: { content: stream, use_tools: trace } };
  }
  let content = '';
  for await (const delta of run()) content += delta;
  if (!schema) return { outputs: { content, use_tools: trace } };
  const { text, structured } = await structuredAnswer(
    model,
    [...messages, { role: 'assistant', content }, { role: 'user', content: schemaInstructions(schema) }],
    p,
    ctx,
  );
  return { outputs: { content: text, structured, use_tools: trace } };
}

/** One call in `use_tools`; a sub-Agent's call holds the calls the sub-Agent made (RAGFlow's trace shows them under its path). */
interface ToolTrace {
  name: string;
  arguments: unknown;
  result: string;
  calls?: ToolTrace[];
}

/** One level of the tool loop: the Agent's own, or a sub-Agent's inside one call. */
interface Rounds {
  readonly ctx: ComponentContext;
  readonly registry: ToolRegistry;
  /** The turn's signal for the Agent's own rounds; the call's (with its timeout) for a sub-Agent. */
  readonly signal: AbortSignal;
  /** Ordinals of the sub-Agent calls this level runs in. */
  readonly path: readonly number[];
  /** The ordinal of the next call made at this level. */
  next: number;
  /** The calls of this level's sub-Agent calls, by the call's ordinal, for `use_tools`. */
  readonly nested: Map<number, ToolTrace[]>;
  /** The invocation's MCP sessions, shared by its sub-Agents. */
  readonly mcp: McpSessions;
}

/** The tool loop, its MCP sessions closed when it ends, however it ends. */
async function* closingMcp(rounds: AsyncGenerator<string, void, undefined>, sessions: McpSessions): AsyncGenerator<string, void, undefined> {
  try {
    yield* rounds;
  } finally {
    await sessions.close();
  }
}

/**
 * The tool loop; yields the text of every round as it arrives. The Agent's own loop (not a
 * sub-Agent's, as in RAGFlow) is asked to cite from the first round the pass has references
 * in — found before it ran or by its tools — and narrows them to what its answer cited.
 */
async function* runRounds(
  model: ChatModel,
  start: ChatMessage[],
  p: AgentParams,
  rounds: Rounds,
  trace: ToolTrace[],
): AsyncGenerator<string, void, undefined> {
  const tools = await bindTools(p, rounds);
  const messages = [...start];
  const mayCite = rounds.path.length === 0;
  let citing = false;
  let answer = '';
  for (let round = 0; ; round++) {
    if (mayCite && !citing && wantsCitations(p, rounds.ctx)) {
      withSystemText(messages, citationPrompt());
      citing = true;
    }
    const last = round >= p.max_rounds || tools.length === 0;
    if (round >= p.max_rounds && tools.length > 0) {
      messages.push({ role: 'user', content: `You have used all ${p.max_rounds} rounds of tool calls. Answer now with what you have.` });
    }
    let text = '';
    const calls: ToolCall[] = [];
    const options: ChatOptions = { messages: [...messages], ...(last ? {} : { tools: tools.map((t) => t.spec) }), ...samplingOptions(p) };
    // a round that failed is asked again
    const recorded = answered(rounds.ctx.recordedCall({ kind: 'model', name: model.id, request: modelCallRequest(model, options) }, (c) => answered(c) !== undefined));
    try {
      for await (const event of recorded ? recordedChat(recorded) : model.chat({ ...options, signal: rounds.signal })) {
        if (event.type === 'text') {
          text += event.text;
          answer += event.text;
          yield event.text;
        } else if (event.type === 'tool_call') {
          calls.push(event.call);
        } else {
          rounds.ctx.recordUsage(event.usage);
          recordModelCall(rounds.ctx, model, options, { result: { text, toolCalls: calls, usage: event.usage }, replayed: recorded !== undefined });
        }
      }
    } catch (error) {
      recordModelCall(rounds.ctx, model, options, { error });
      throw error;
    }
    if (!recorded) await rounds.ctx.callCompleted();
    if (last || calls.length === 0) {
      if (citing) keepCited(rounds.ctx, answer);
      return;
    }
    messages.push({ role: 'assistant', content: text, tool_calls: calls });
    const first = rounds.next;
    rounds.next += calls.length;
    // every call settles before the round goes on or stops: none may still run once the turn pauses
    const settled = await Promise.allSettled(calls.map((call, i) => callOne(call, tools, rounds, first + i, { approval: p.approval, said: text })));
    const failed = settled.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
    if (failed.length > 0) throw failed.find((e) => !(e instanceof PauseRequest)) ?? failed[0];
    const results = settled.map((r) => (r as PromiseFulfilledResult<string>).value);
    calls.forEach((call, i) => {
      const result = results[i] as string;
      const nested = rounds.nested.get(first + i);
      trace.push({ name: call.name, arguments: parseArguments(call.arguments) ?? call.arguments, result, ...(nested && nested.length > 0 ? { calls: nested } : {}) });
      messages.push({ role: 'tool', content: result, tool_call_id: call.id });
    });
  }
}

/** Appends to the system prompt, or starts one. */
function withSystemText(messages: ChatMessage[], text: string): void {
  const first = messages[0];
  if (first?.role === 'system' && typeof first.content === 'string') messages[0] = { ...first, content: first.content ? `${first.content}\n\n${text}` : text };
  else messages.unshift({ role: 'system', content: text });
}

interface BoundTool {
  spec: ToolSpec;
  tool: Tool;
  /** The name of its entry in `tools` (or the MCP tool's own): what `approval` may list. */
  entryName: string;
}

/**
 * The tools of one level, named for the model as RAGFlow does: `<name>_<index>`, the MCP
 * servers' tools after the entries of `tools`.
 */
async function bindTools(p: AgentParams, rounds: Rounds): Promise<BoundTool[]> {
  const entries = p.tools.map((entry, i) => {
    const tool = isSubAgent(entry) ? subAgentTool(entry, subAgentHost(rounds)) : createTool(entry, rounds.registry);
    return { name: modelName(tool.name, i), tool, entryName: entry.name };
  });
  const mcp = p.mcp.length > 0 ? (await rounds.mcp.tools(p.mcp, entries.length)).map((t) => ({ ...t, entryName: t.tool.name })) : [];
  return [...entries, ...mcp].map(({ name, tool, entryName }) => ({ tool, entryName, spec: { name, description: tool.description, parameters: tool.parameters } }));
}

function createTool(entry: AgentToolEntry, registry: ToolRegistry): Tool {
  const kind = registry.kind(entry.component_name);
  if (!kind) throw new ToolUnavailableError(entry.component_name);
  return kind.create(entry);
}

/** The trace a sub-Agent call at `ordinal` of this level fills (a fresh one when it runs again). */
function traceOf(rounds: Rounds, ordinal: number): ToolTrace[] {
  const trace: ToolTrace[] = [];
  rounds.nested.set(ordinal, trace);
  return trace;
}

/** A sub-Agent runs this same loop, one level down, under its call's signal. */
function subAgentHost(rounds: Rounds) {
  return {
    component: rounds.ctx,
    rounds: (model: ChatModel, messages: ChatMessage[], params: AgentParams, call: ToolContext) =>
      runRounds(model, messages, params, { ctx: rounds.ctx, registry: rounds.registry, signal: call.signal, path: [...call.path, call.ordinal], next: 0, mcp: rounds.mcp, nested: new Map() }, traceOf(rounds, call.ordinal)),
  };
}

/**
 * One call, its answer as the text for the model. Permanent failures go back to the model as
 * `error: ...` (RAGFlow hands a tool's exception to the model the same way); transient ones
 * fail the turn; a tool's own suspension fails the Agent, since it cannot wait for one yet. A
 * call that needs approval waits for a person's decision first (agent-approvals.ts).
 */
async function callOne(call: ToolCall, tools: readonly BoundTool[], rounds: Rounds, ordinal: number, gate: { approval: ApprovalParam; said: string }): Promise<string> {
  const bound = tools.find((t) => t.spec.name === call.name);
  if (!bound) return `error: there is no tool named ${call.name}`;
  const args = parseArguments(call.arguments);
  if (!args) return 'error: the arguments are not a JSON object';
  const services: ToolServices = rounds.ctx.services as ComponentServices;
  const ctx: ToolContext = {
    signal: rounds.signal,
    services,
    componentId: rounds.ctx.componentId,
    ordinal,
    path: rounds.path,
    recordUsage: (usage) => rounds.ctx.recordUsage(usage),
    get: (reference) => rounds.ctx.get(reference),
  };
  let request = { tool: call.name, arguments: args };
  if (needsApproval(gate.approval, { name: call.name, toolName: bound.tool.name, entryName: bound.entryName, args })) {
    const decision = await decide(rounds.ctx, { name: call.name, toolName: bound.tool.name, args, request, ordinal, path: rounds.path, said: gate.said, parameters: bound.tool.parameters });
    if (decision.decision === 'reject') return rejection(decision);
    if (decision.arguments) request = { tool: call.name, arguments: decision.arguments };
  }
  // the call as recorded: with the tool's settings, so a version that changes them calls again
  const recordedAs = bound.tool.settings === undefined ? request : { ...request, settings: bound.tool.settings };
  // a sub-Agent runs again, its own rounds and calls answered from their records; its record,
  // if the batch had completed it, is passed over once it has (it comes after theirs)
  const nested = bound.tool.nested === true;
  const replayed = nested ? undefined : recordedOutcome(rounds.ctx.recordedCall({ kind: 'tool', name: call.name, request: recordedAs }, (c) => recordedOutcome(c) !== undefined));
  let outcome: SettledOutcome;
  let passedOver = false;
  try {
    outcome = replayed ?? (await callTool(bound.tool, request.arguments, ctx, rounds.registry, call.name));
    passedOver = nested && rounds.ctx.recordedCall({ kind: 'tool', name: call.name, request: recordedAs }) !== undefined;
  } catch (error) {
    // a sub-Agent that paused made no call of its own here: it runs again when answered
    if (!(error instanceof PauseRequest)) rounds.ctx.recordCall({ kind: 'tool', name: call.name, request: recordedAs, error: error instanceof Error ? error.message : String(error) });
    throw error;
  }
  // a tool of another kind may hand back anything: only lists are taken
  const references = outcome.kind === 'result' && Array.isArray(outcome.references?.chunks) && Array.isArray(outcome.references.doc_aggs) ? outcome.references : undefined;
  rounds.ctx.recordCall({
    kind: 'tool',
    name: call.name,
    request: recordedAs,
    ...(replayed || passedOver ? { replayed: true } : {}),
    ...(outcome.kind === 'result'
      ? {
        result: {
          content: outcome.content,
          ...(outcome.data !== undefined ? { data: outcome.data } : {}),
          // in full when small (a replay answers the call from them), else by id
          ...(references ? { references: referencesForRecord(references) } : {}),
        },
        // the chunks in full, for a resumed batch that answers this call again
        ...(references ? { replay: { references } satisfies RecordedExtra } : {}),
      }
      // a failure told to the model is final: a resumed batch tells it again rather than call
      : outcome.kind === 'error' ? { error: outcome.error.message, replay: { told: true } satisfies RecordedExtra } : { result: { suspended: outcome.prompt } }),
  });
  if (references) rounds.ctx.addReference(references.chunks, references.doc_aggs);
  if (!replayed && !passedOver) await rounds.ctx.callCompleted();
  if (outcome.kind === 'result') return outcome.content;
  if (outcome.kind === 'error') return `error: ${outcome.error.message}`;
  throw new ToolSuspendedError(call.name, outcome.prompt);
}

/** What a tool call's record keeps for a replay besides its result. */
interface RecordedExtra {
  /** The result's references in full. */
  references?: ToolReferences;
  /** The call failed for good, and the model was told. */
  told?: true;
}

function answered(call: CompletedCall | undefined): CompletedCall | undefined {
  return call?.record.status === 'ok' ? call : undefined;
}

/** A model round answered from its record: its text in one piece, its tool calls, its usage. */
async function* recordedChat(call: CompletedCall): AsyncGenerator<ChatEvent, void, undefined> {
  const result = call.record.result as { text?: string; tool_calls?: ToolCall[]; usage: Usage };
  if (result.text) yield { type: 'text', text: result.text };
  for (const toolCall of result.tool_calls ?? []) yield { type: 'tool_call', call: toolCall };
  yield { type: 'done', usage: result.usage, finish_reason: result.tool_calls?.length ? 'tool_calls' : 'stop' };
}

/**
 * A tool call answered from its record, as the tool answered it: its result, or the failure
 * the model was told. Undefined (make the call) for a failure that may have been transient, a
 * suspension, or references kept by id only.
 */
function recordedOutcome(call: CompletedCall | undefined): SettledOutcome | undefined {
  if (!call) return undefined;
  const extra = call.replay as RecordedExtra | undefined;
  if (call.record.status === 'error') return extra?.told ? { kind: 'error', error: new ToolError(call.record.error ?? 'the tool failed') } : undefined;
  const result = call.record.result;
  if (!isRecord(result) || typeof result.content !== 'string') return undefined;
  // references recorded by id only cannot be added again: the call is made again instead
  const references = extra?.references ?? referencesFromRecord(result.references);
  if (result.references !== undefined && !references) return undefined;
  return {
    kind: 'result',
    content: result.content,
    ...(result.data !== undefined ? { data: result.data } : {}),
    ...(references ? { references } : {}),
  };
}

function parseArguments(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text || '{}');
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** This Agent or one of its sub-Agents has calls approved first. */
function asksApproval(p: AgentParams): boolean {
  return p.approval !== null || p.tools.filter(isSubAgent).some((t) => asksApproval(t.params));
}

function agentWindow(p: AgentParams): number {
  return Math.max(p.message_history_window_size ?? DEFAULT_HISTORY_WINDOW, ...p.tools.filter(isSubAgent).map((t) => agentWindow(t.params)));
}

function toolDepth(p: AgentParams): number {
  return p.tools.length === 0 ? 0 : 1 + Math.max(0, ...p.tools.filter(isSubAgent).map((t) => toolDepth(t.params)));
}
