/**
 * What components that call out need from their host, handed to the Canvas as
 * `options.services` and never serialized: the model resolver, the outbound HTTP guard,
 * secrets by name, and the tools Agents may call. Each accessor fails with a clear component
 * error when the host gave none (tools fall back to the Agent's own registry).
 */
import type { ComponentContext } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import type { ModelResolver } from '../llm/models';
import type { SsrfGuard } from '../outbound/ssrf';
import type { ToolRegistry } from '../tools/registry';

export interface ComponentServices {
  models?: ModelResolver;
  guard?: SsrfGuard;
  /**
   * Secret values by name, for `{secret.NAME}` in Invoke headers: the run's tenant's secrets
   * (lib/secrets), so hosts hand each run a resolver of its own tenant.
   */
  secret?: (name: string) => string | undefined | Promise<string | undefined>;
  /** Tool kinds for Agents, with the call timeout and the call hook (lib/tools/registry). */
  tools?: ToolRegistry;
}

export function services(options: ComponentServices): Readonly<Record<string, unknown>> {
  return { ...options };
}

export function modelsOf(ctx: ComponentContext): ModelResolver {
  const models = (ctx.services as ComponentServices).models;
  if (!models) throw new ComponentError('no language model is configured for this run');
  return models;
}

export function guardOf(ctx: ComponentContext): SsrfGuard {
  const guard = (ctx.services as ComponentServices).guard;
  if (!guard) throw new ComponentError('outbound HTTP is not configured for this run');
  return guard;
}

export async function secretOf(ctx: ComponentContext, name: string): Promise<string | undefined> {
  return (ctx.services as ComponentServices).secret?.(name);
}

export function toolsOf(ctx: ComponentContext): ToolRegistry | undefined {
  return (ctx.services as ComponentServices).tools;
}
