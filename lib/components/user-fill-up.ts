/**
 * UserFillUp: a form that pauses the run until the user answers it. It asks on every visit
 * (inside a loop, every round); values arrive with the next turn and are read downstream as
 * `{UserFillUp:Id@<field>}`. Tips may reference variables and are shown with the form.
 * With `timeout_seconds` a timer is armed while it waits; when it fires the form runs without
 * an answer (`timed_out: true`) and goes to `timeout_goto`.
 *
 * Decisions (Easel's addition, `decisions: [{id, label, to}]`): the form also asks for one
 * decision, shown as buttons, with or without other fields; the answer names its id in the
 * field `decision`, and the run goes to that decision's `to` only. The outputs `decision` and
 * `decision_label` say which was taken. A timeout goes to `timeout_goto`, or else down the
 * downstream edges no decision names.
 *
 * `form_link` (Easel's addition) sends the form's link with the `turn.paused` webhook;
 * `form_link_email` e-mails it (form-link-mail.ts).
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import type { FormField } from '../canvas/forms';
import { idList } from './checks';
import { decisionField, fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';
import { DEFAULT_MAIL_LINK_SECONDS, formLinkEmailParam, renderPauseMail } from './form-link-mail';

const DEFAULT_TIPS = 'Please fill up the form';

/** The field a decision is answered in. */
export const DECISION_FIELD = 'decision';
const MAX_DECISIONS = 20;

const decision = z.lazy(() => z.looseObject({
  id: z.string().trim().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1-64 letters, digits, or _ . : -'),
  label: z.string().trim().max(200).nullish(),
  to: z.union([z.string(), z.array(z.string())]).transform(idList).pipe(z.array(z.string()).min(1, 'a decision needs a target')),
}));

const params = z.looseObject({
  enable_tips: z.boolean().nullish().transform((v) => v ?? true),
  tips: z.string().nullish().transform((v) => v ?? DEFAULT_TIPS),
  inputs: formFieldsSchema,
  /** Easel's addition: wait this long for an answer, then go to `timeout_goto` (or on downstream). */
  timeout_seconds: z.number().int().min(1).max(366 * 86_400).nullish(),
  timeout_goto: z.union([z.string(), z.array(z.string())]).nullish().transform(idList),
  /**
   * Easel's addition: the form's link (a form link, answered without a key) goes with the
   * `turn.paused` webhook of the turn that pauses here; `true`, or `{expires_in_seconds}`.
   */
  form_link: z
    .union([z.literal(true), z.strictObject({ expires_in_seconds: z.number().int().min(60).max(30 * 86_400) })])
    .nullish(),
  /** Easel's addition: the form's link is e-mailed when the run pauses here (form-link-mail.ts). */
  form_link_email: formLinkEmailParam,
  decisions: z
    .array(decision)
    .max(MAX_DECISIONS, `at most ${MAX_DECISIONS} decisions`)
    .nullish()
    .transform((d) => (d ?? []).map((x) => ({ id: x.id, label: x.label || x.id, to: x.to }))),
});

type Params = z.output<typeof params>;

/** The lifetime of the link a UserFillUp asks to send when it pauses (its `form_link`); undefined: none. */
export function formLinkSeconds(p: unknown, defaultSeconds: number): number | undefined {
  const link = (p as Partial<Params> | undefined)?.form_link;
  if (!link) return undefined;
  return link === true ? defaultSeconds : link.expires_in_seconds;
}

function formFields(p: Params): FormField[] {
  const fields = toFormFields(p.inputs);
  if (p.decisions.length === 0) return fields;
  return [...fields, decisionField(DECISION_FIELD, p.decisions)];
}

const decisionTargets = (p: Params) => p.decisions.flatMap((d) => d.to);

export const userFillUp = defineComponent({
  name: 'UserFillUp',
  params,
  form: {
    fields: formFields,
    holdForOptional: true,
    keepValues: false,
    tips: async (p, ctx) => (p.enable_tips ? ctx.render(p.tips) : ''),
    timeoutSeconds: (p) => p.timeout_seconds ?? undefined,
    // the link's lifetime: the mail's own, else form_link's, else 7 days
    mail: async (p, ctx) =>
      p.form_link_email ? renderPauseMail(p.form_link_email, ctx, p.enable_tips ? await ctx.render(p.tips) : '', formLinkSeconds(p, DEFAULT_MAIL_LINK_SECONDS) ?? DEFAULT_MAIL_LINK_SECONDS) : undefined,
  },
  branchTargets: (p) => [...p.timeout_goto, ...decisionTargets(p)],
  // targets are checked with every branch target (they must exist, in the same scope)
  check(p) {
    const problems: { field: string; message: string }[] = [];
    if (p.decisions.length > 0 && Object.hasOwn(p.inputs, DECISION_FIELD)) {
      problems.push({ field: `obj.params.inputs.${DECISION_FIELD}`, message: `"${DECISION_FIELD}" is where the decision is answered: give this input another name` });
    }
    const seen = new Set<string>();
    p.decisions.forEach((d, i) => {
      if (seen.has(d.id)) problems.push({ field: `obj.params.decisions.${i}.id`, message: `the decision "${d.id}" is declared twice` });
      seen.add(d.id);
    });
    return problems;
  },
  async invoke(p, ctx) {
    const outputs = fieldOutputs(formFields(p), ctx.formValues);
    if (p.enable_tips) outputs.tips = await ctx.render(p.tips);
    outputs.timed_out = ctx.timedOut;
    if (p.decisions.length > 0) {
      const chosen = ctx.timedOut ? undefined : p.decisions.find((d) => d.id === outputs[DECISION_FIELD]);
      outputs.decision_label = chosen?.label ?? null;
      if (chosen) return { outputs, next: chosen.to };
      // no decision (the timer fired): the timeout branch, else the edges no decision names
      const targets = decisionTargets(p);
      return { outputs, next: p.timeout_goto.length > 0 ? p.timeout_goto : ctx.downstream.filter((id) => !targets.includes(id)) };
    }
    if (p.timeout_goto.length === 0) return { outputs };
    // the timeout branch is taken on a timeout only; an answer follows the rest of the downstream
    return { outputs, next: ctx.timedOut ? p.timeout_goto : ctx.downstream.filter((id) => !p.timeout_goto.includes(id)) };
  },
});
