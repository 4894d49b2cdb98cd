/**
 * The services a run replayed with `on_differ: "refuse"` gets: the run's own, except that every
 * way out of the run — a model, a tool (an Agent's or one on the canvas, MCP's included), a
 * retrieval, an HTTP request — refuses the call instead of making it. A call answered from its
 * record never reaches them; any other would go live, so the replay of that run stops there.
 * Each refusal is kept (`refusals`), whatever the component then made of the error.
 */
import { type CallKind, TransientError } from '../canvas';
import type { ComponentServices } from '../components/services';
import type { RunKnowledge } from '../knowledge/types';
import type { ChatEvent, ChatModel } from '../llm/types';
import type { ModelResolver } from '../llm/models';
import { SsrfGuard, type SsrfCheckResult } from '../outbound/ssrf';
import { createToolRegistry, type ToolRegistry } from '../tools/registry';

/** A live call refused by a replay in `refuse` mode: transient, so the turn stops at once. */
export class ReplayRefusedError extends TransientError {
  constructor(
    readonly kind: CallKind,
    readonly callName: string | undefined,
  ) {
    super(`the replay refused a live ${kind} call${callName ? ` (${callName})` : ''}: no record answers it`);
  }
}

/** `services` with every call out refused; `fallbackTools` stands for an Agent's own registry when the services carry none. */
export function refusingServices(services: Readonly<Record<string, unknown>>, fallbackTools: ToolRegistry, refusals: ReplayRefusedError[]): Readonly<Record<string, unknown>> {
  const base = services as ComponentServices;
  const refuse = (kind: CallKind, name?: string): never => {
    const error = new ReplayRefusedError(kind, name);
    refusals.push(error);
    throw error;
  };
  const out: ComponentServices = { ...base, tools: refusingTools(base.tools ?? fallbackTools, refuse), guard: new RefusingGuard(refuse) };
  if (base.models) out.models = refusingModels(base.models, refuse);
  if (base.knowledge) out.knowledge = refusingKnowledge(base.knowledge, refuse);
  return out as Readonly<Record<string, unknown>>;
}

type Refuse = (kind: CallKind, name?: string) => never;

function refusingModels(models: ModelResolver, refuse: Refuse): ModelResolver {
  return {
    resolve(llmId) {
      const model = models.resolve(llmId);
      return {
        id: model.id,
        async *chat(): AsyncGenerator<ChatEvent, void, undefined> {
          refuse('model', model.id);
        },
      } satisfies ChatModel;
    },
  };
}

function refusingKnowledge(knowledge: RunKnowledge, refuse: Refuse): RunKnowledge {
  return {
    // which knowledge bases the ids name is read from the tenant's own records, not a call
    resolve: (ids) => knowledge.resolve(ids),
    retrieve: async (kbs) => refuse('retrieval', kbs.map((kb) => kb.id).join(',')),
  };
}

function refusingTools(tools: ToolRegistry, refuse: Refuse): ToolRegistry {
  return createToolRegistry(
    tools.kinds.map((name) => tools.kind(name)).filter((k): k is NonNullable<typeof k> => k !== undefined),
    { defaultTimeoutMs: tools.defaultTimeoutMs, timer: tools.timer, hook: async (call) => refuse('tool', call.tool) },
  );
}

/** Refuses every URL: an Invoke (or any request to a tenant's URL) never leaves. */
class RefusingGuard extends SsrfGuard {
  constructor(private readonly refuse: Refuse) {
    super();
  }

  override async check(url: string | URL): Promise<SsrfCheckResult> {
    let host: string | undefined;
    try {
      host = new URL(typeof url === 'string' ? url : url.href).host;
    } catch {
      host = undefined;
    }
    return this.refuse('invoke', host);
  }
}
