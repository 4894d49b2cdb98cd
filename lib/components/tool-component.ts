/**
 * A built-in tool placed on the canvas, as RAGFlow allows for every tool (agent/tools/base.py
 * `ToolBase` is a component): the component's params are the tool kind's params plus the
 * values of the tool's function arguments (`query`, `urls`, `to_email`, ...), each a reference
 * (`{sys.query}`, `Agent:X@content`) or text with references in it; an argument left out takes
 * the kind's default (`canvasDefaults`, RAGFlow's meta defaults). Its outputs are RAGFlow's: `formalized_content` (what a
 * model would read) and `json` (the structured answer), or the tool's own names (`outputs`).
 *
 * The call goes through `callTool` with the run's tool registry (timeouts, the call hook, the
 * call's record), as an Agent's call would. A permanent failure is the component's error (its
 * exception handling applies); a transient one fails the turn.
 */
import { z } from 'zod';
import { type ComponentContext, type ComponentDefinition, defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { asReference, exactReference, isRecord, valueToText } from '../canvas/references';
import { callTool } from '../tools/call';
import { builtinTools, type ToolKind, type ToolRegistry } from '../tools/registry';
import type { ToolContext, ToolReferences, ToolServices } from '../tools/types';
import type { ComponentServices } from './services';
import { referencesForRecord, referencesFromRecord } from './recorded-references';
import { toolsOf } from './services';

/** The component for tool kind `kind`, its params checked by the kind's schema. */
export function toolComponent(kind: ToolKind<any>, fallback: ToolRegistry = builtinTools): ComponentDefinition<unknown> {
  return defineComponent({
    name: kind.name,
    external: true,
    params: z.unknown().transform((raw, issue) => {
      const parsed = kind.params.safeParse(raw ?? {});
      if (parsed.success) return { raw: isRecord(raw) ? raw : {}, params: parsed.data as unknown };
      for (const problem of parsed.error.issues) issue.issues.push({ code: 'custom', message: problem.message, input: raw, path: problem.path });
      return z.NEVER;
    }),
    defaultOutput: 'formalized_content',
    async invoke(p, ctx) {
      const { raw, params } = p as { raw: Record<string, unknown>; params: unknown };
      const registry = toolsOf(ctx) ?? fallback;
      const tool = (registry.kind(kind.name) ?? kind).create({ component_name: kind.name, name: kind.name, params });
      const args = await argumentsOf(tool.parameters, raw, kind.canvasDefaults ?? queryDefault(tool.parameters), ctx);
      const toolCtx: ToolContext = {
        signal: ctx.signal,
        services: ctx.services as ComponentServices as ToolServices,
        componentId: ctx.componentId,
        ordinal: 0,
        path: [],
        recordUsage: (usage) => ctx.recordUsage(usage),
        get: (reference) => ctx.get(reference),
      };
      const request = { tool: tool.name, arguments: args };
      // a call the turn has a record of is answered from it; a recorded failure is tried again
      const recorded = ctx.recordedCall({ kind: 'tool', name: tool.name, request });
      const answer = recorded?.record.status === 'ok' ? recordedResult(recorded.record.result) : undefined;
      if (answer) {
        ctx.recordCall({ kind: 'tool', name: tool.name, request, result: recorded?.record.result, replayed: true });
        if (answer.references) ctx.addReference(answer.references.chunks, answer.references.doc_aggs);
        return { outputs: answer.outputs ?? { formalized_content: answer.content, json: answer.data ?? [] } };
      }
      const outcome = await callTool(tool, args, toolCtx, registry).catch((error: unknown) => {
        ctx.recordCall({ kind: 'tool', name: tool.name, request, error: error instanceof Error ? error.message : String(error) });
        throw error;
      });
      if (outcome.kind === 'suspend') throw new ComponentError(`${kind.name} asks a person to decide, which a component on the canvas cannot wait for`);
      if (outcome.kind === 'error') {
        ctx.recordCall({ kind: 'tool', name: tool.name, request, error: outcome.error.message });
        throw outcome.error;
      }
      // the tool's own outputs (Email's `success`) too, and its references as an Agent's tool
      // call keeps them (recorded-references.ts): what a replay answers the call with
      ctx.recordCall({
        kind: 'tool',
        name: tool.name,
        request,
        result: {
          content: outcome.content,
          ...(outcome.data !== undefined ? { data: outcome.data } : {}),
          ...(outcome.outputs ? { outputs: outcome.outputs } : {}),
          ...(outcome.references ? { references: referencesForRecord(outcome.references) } : {}),
        },
      });
      if (outcome.references) ctx.addReference(outcome.references.chunks, outcome.references.doc_aggs);
      return { outputs: outcome.outputs ?? { formalized_content: outcome.content, json: outcome.data ?? [] } };
    },
  });
}

/**
 * A canvas tool's call as its record keeps it: the content, the data, the tool's own outputs
 * and its references. One whose references were kept by id only is not answered from it.
 */
function recordedResult(result: unknown): { content: string; data?: unknown; outputs?: Record<string, unknown>; references?: ToolReferences } | undefined {
  if (!isRecord(result) || typeof result.content !== 'string') return undefined;
  const references = referencesFromRecord(result.references);
  if (result.references !== undefined && !references) return undefined;
  return {
    content: result.content,
    ...(result.data !== undefined ? { data: result.data } : {}),
    ...(isRecord(result.outputs) ? { outputs: result.outputs } : {}),
    ...(references ? { references } : {}),
  };
}

/**
 * RAGFlow's convention for a tool's main input (`query`, `q`, `to_email`): its meta defaults
 * the first required string argument to `{sys.query}`, so a search on the canvas searches what
 * the user said. Kinds whose defaults differ say so (`canvasDefaults`).
 */
function queryDefault(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : [];
  const main = required.find((name) => typeof name === 'string' && isRecord(properties[name]) && (properties[name] as Record<string, unknown>).type === 'string');
  return typeof main === 'string' ? { [main]: '{sys.query}' } : {};
}

/**
 * The function's arguments from the component's params: each property of the schema the params
 * name, its value resolved; else the kind's default for it.
 */
async function argumentsOf(schema: Record<string, unknown>, raw: Record<string, unknown>, defaults: Readonly<Record<string, unknown>>, ctx: ComponentContext): Promise<Record<string, unknown>> {
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const args: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(properties)) {
    const given = raw[name];
    const value = given !== undefined && given !== null && given !== '' ? given : defaults[name];
    if (value === undefined) continue;
    args[name] = await resolveArgument(value, isRecord(spec) ? spec.type : undefined, ctx);
  }
  return args;
}

/** A reference gives its value; text is rendered; a string argument gets text. */
async function resolveArgument(value: unknown, type: unknown, ctx: ComponentContext): Promise<unknown> {
  if (typeof value !== 'string') return value;
  const ref = asReference(value);
  let resolved: unknown;
  if (ref) {
    const found = await ctx.get(value);
    resolved = found !== undefined || exactReference(value) ? found : await ctx.render(value);
  } else {
    resolved = await ctx.render(value);
  }
  return type === 'string' ? valueToText(resolved) : resolved;
}
