/**
 * Begin: where every pass starts. Its `inputs` are the run's first values, read downstream as
 * `{begin@<field>}`: explicit inputs, else a query when Begin has exactly one field (RAGFlow's
 * rule). Under native rules a required field without a value makes them a form asked on the
 * first turn; under RAGFlow's (canvas option `beginRules`) Begin never holds the run. Values
 * stay for later passes of a conversational run.
 *
 * In webhook mode (`mode: "Webhook"`, RAGFlow's spelling) a run is started by an HTTP delivery
 * (lib/http/routes/webhooks.ts): the delivery's `{query, headers, body}`, as its declared
 * schema kept them, are Begin's outputs — `{begin@body.order.id}` — and `inputs` are not asked.
 * Such a run is a task: it accepts no turn once it ended. The settings are validated here
 * (webhook-params.ts); a bad one names its field.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { findReferences } from '../canvas/references';
import { dict } from '../canvas/state';
import { fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';
import { type WebhookConfig, webhookConfigSchema } from './webhook-params';

/** What RAGFlow's Begin says first when its DSL sets no `prologue`. */
export const DEFAULT_PROLOGUE = "Hi! I'm your smart assistant. What can I do for you?";

/** What a webhook delivery gives Begin: its outputs. */
export const WEBHOOK_OUTPUTS = ['query', 'headers', 'body'] as const;

const params = z.lazy(() => z
  .looseObject({
    mode: z
      .string()
      .nullish()
      .transform((m) => (m ? m.trim() : 'conversational'))
      .transform((m) => (m.toLowerCase() === 'webhook' ? 'Webhook' : m))
      .pipe(z.enum(['conversational', 'task', 'Webhook'], { error: 'must be "conversational", "task" or "Webhook"' })),
    prologue: z.string().nullish(),
    enablePrologue: z.boolean().nullish(),
    enable_tips: z.boolean().nullish(),
    tips: z.string().nullish(),
    inputs: formFieldsSchema,
  })
  .transform((p, ctx) => {
    if (p.mode !== 'Webhook') return { ...p, webhook: undefined as WebhookConfig | undefined };
    const parsed = webhookConfigSchema.safeParse(p);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.issues.push({ code: 'custom', message: issue.message, path: issue.path as PropertyKey[], input: p });
      return z.NEVER;
    }
    return { ...p, webhook: parsed.data as WebhookConfig | undefined };
  }));

export const begin = defineComponent({
  name: 'Begin',
  params,
  entry: {
    mode: (p) => (p.mode === 'Webhook' ? 'task' : p.mode),
    prologue: (p) => (p.webhook || p.enablePrologue === false ? '' : (p.prologue ?? DEFAULT_PROLOGUE)),
  },
  form: {
    fields: (p) => (p.webhook ? [] : toFormFields(p.inputs)),
    holdForOptional: false,
    keepValues: true,
    tips: async (p, ctx) => (p.enable_tips && p.tips ? ctx.render(p.tips) : ''),
  },
  check(p, scope) {
    // answered before the run starts, an Immediately response can only show what the delivery brought
    const template = p.webhook?.execution_mode === 'Immediately' ? p.webhook.response.body_template : undefined;
    const foreign = findReferences(template ?? '').filter((r) => r.kind !== 'component' || r.componentId !== scope.componentId);
    return foreign.map((r) => ({
      field: 'obj.params.response.body_template',
      message: `{${r.raw}}: an "Immediately" answer goes out before the run, so it can show only this Begin's outputs ({${scope.componentId}@body...}); use "Streaming" to answer with the run's results`,
    }));
  },
  invoke(p, ctx) {
    if (p.webhook) {
      // the delivery arrives as this form's values (RunInput.webhook_payload)
      const outputs = dict();
      for (const key of WEBHOOK_OUTPUTS) outputs[key] = ctx.formValues[key] ?? {};
      return { outputs };
    }
    return { outputs: fieldOutputs(toFormFields(p.inputs), ctx.formValues) };
  },
});
