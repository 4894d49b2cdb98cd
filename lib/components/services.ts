/**
 * What components that call out need from their host, handed to the Canvas as
 * `options.services` and never serialized: the model resolver, the outbound HTTP guard,
 * secrets by name, the tools Agents may call, the run's uploaded files and its tenant's
 * knowledge bases. Each accessor fails with a clear component error when the host gave none
 * (tools fall back to the Agent's own registry).
 */
import type { ComponentContext } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import type { RunKnowledge } from '../knowledge/types';
import type { ModelResolver } from '../llm/models';
import type { RunMcp } from '../mcp/types';
import type { SsrfGuard } from '../outbound/ssrf';
import type { ToolRegistry } from '../tools/registry';
import type { AttachmentLimits } from './attachments';

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
  /** The bytes of uploaded files, for models shown images and documents (lib/components/attachments). */
  files?: RunFiles;
  /** Caps on what one model call is shown; DEFAULT_ATTACHMENT_LIMITS for those not given. */
  attachmentLimits?: Partial<AttachmentLimits>;
  /** The run's tenant's knowledge bases, for Retrieval (lib/knowledge). */
  knowledge?: RunKnowledge;
  /** The run's tenant's MCP servers, for an Agent's `mcp` entries (lib/mcp). */
  mcp?: RunMcp;
}

/**
 * Uploaded files as a run reads them: the run's tenant's only (a host builds one per tenant).
 * Files are immutable and content-addressed, so reading one again (a turn resumed after a
 * crash) gives the same bytes: reads are not recorded as calls; the model call that sends
 * them records each file by its sha256.
 *
 * @example
 *   const file = await filesOf(ctx).read('file_0123...'); // {bytes, mime_type, name, sha256} or undefined
 */
export interface RunFiles {
  /** The file's content, or undefined when it does not exist (deleted, expired, another tenant's). */
  read(fileId: string): Promise<FileContent | undefined>;
}

export interface FileContent {
  bytes: Uint8Array;
  /** As uploaded. */
  mime_type: string;
  name: string;
  sha256: string;
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

export function filesOf(ctx: ComponentContext): RunFiles {
  const files = (ctx.services as ComponentServices).files;
  if (!files) throw new ComponentError('uploaded files cannot be read in this run');
  return files;
}

export function knowledgeOf(ctx: ComponentContext): RunKnowledge {
  const knowledge = (ctx.services as ComponentServices).knowledge;
  if (!knowledge) throw new ComponentError('knowledge bases are not configured for this run');
  return knowledge;
}

export function mcpOf(ctx: ComponentContext): RunMcp {
  const mcp = (ctx.services as ComponentServices).mcp;
  if (!mcp) throw new ComponentError('MCP servers are not configured for this run');
  return mcp;
}

export function toolsOf(ctx: ComponentContext): ToolRegistry | undefined {
  return (ctx.services as ComponentServices).tools;
}
