/**
 * UserFillUp: a form that pauses the run until the user answers it. It asks on every visit
 * (inside a loop, every round); values arrive with the next turn and are read downstream as
 * `{UserFillUp:Id@<field>}`. Tips may reference variables and are shown with the form.
 * With `timeout_seconds` a timer is armed while it waits; when it fires the form runs without
 * an answer (`timed_out: true`) and goes to `timeout_goto`.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { idList } from './checks';
import { fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';

const DEFAULT_TIPS = 'Please fill up the form';

const params = z.looseObject({
  enable_tips: z.boolean().nullish().transform((v) => v ?? true),
  tips: z.string().nullish().transform((v) => v ?? DEFAULT_TIPS),
  inputs: formFieldsSchema,
  /** Easel's addition: wait this long for an answer, then go to `timeout_goto` (or on downstream). */
  timeout_seconds: z.number().int().min(1).max(366 * 86_400).nullish(),
  timeout_goto: z.union([z.string(), z.array(z.string())]).nullish().transform(idList),
});

export const userFillUp = defineComponent({
  name: 'UserFillUp',
  params,
  form: {
    fields: (p) => toFormFields(p.inputs),
    holdForOptional: true,
    keepValues: false,
    tips: async (p, ctx) => (p.enable_tips ? ctx.render(p.tips) : ''),
    timeoutSeconds: (p) => p.timeout_seconds ?? undefined,
  },
  branchTargets: (p) => p.timeout_goto,
  async invoke(p, ctx) {
    const outputs = fieldOutputs(toFormFields(p.inputs), ctx.formValues);
    if (p.enable_tips) outputs.tips = await ctx.render(p.tips);
    outputs.timed_out = ctx.timedOut;
    if (p.timeout_goto.length === 0) return { outputs };
    // the timeout branch is taken on a timeout only; an answer follows the rest of the downstream
    return { outputs, next: ctx.timedOut ? p.timeout_goto : ctx.downstream.filter((id) => !p.timeout_goto.includes(id)) };
  },
});
