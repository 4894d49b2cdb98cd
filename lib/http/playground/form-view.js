// @ts-check
/**
 * The form of a pause in the conversation: its fields (fields.js), a decision as buttons, a
 * countdown while its timer is armed, and what becomes of it — sent from here (hidden behind
 * the answers while the turn runs, back if they were refused), replaced by the next pause, or
 * overtaken by a turn committed elsewhere and kept read-only, saying why.
 */

import { display, fieldControl, h } from './fields.js';

/** @typedef {import('./fields.js').Field} Field */
/** @typedef {import('./fields.js').FieldControl} FieldControl */
/** @typedef {{component_id: string, tips: string, inputs: Record<string, Field>}} Hint */
/** @typedef {{field: string, message: string}} FieldProblem */
/**
 * What sending the answers led to: sent (the run moved on), refused (`problems` name the
 * fields), or not sent for another reason (the server was unreachable; the page said why).
 * @typedef {{sent: true} | {sent: false, problems?: FieldProblem[]}} Sending
 */
/**
 * @typedef {object} FormHooks
 * @property {(file: File) => Promise<string>} upload turns a chosen file into its id
 * @property {(inputs: Record<string, unknown>, rows: [string, string][], answers: HTMLElement) => Promise<Sending>} send
 *   sends the answers (`rows`: label and value, shown in `answers`, already on screen)
 * @property {(answers: [string, string][]) => HTMLElement} answersEntry the entry showing what was answered
 * @property {(error: unknown) => Promise<void>} unreadable says a field could not be read (a file that did not upload)
 * @property {() => boolean} busy whether a turn is running
 */

export class FormView {
  /**
   * Renders the form as the conversation's newest entry, focused on its first field.
   * @param {(entry: HTMLElement) => HTMLElement} add appends an entry to the conversation
   * @param {Hint} hint @param {number} turn the turn that paused @param {FormHooks} hooks
   */
  constructor(add, hint, turn, hooks) {
    this.hooks = hooks;
    /** No longer the run's open form (replaced, overtaken or removed). */
    this.done = false;
    /** @type {HTMLElement | null} */
    this.countdown = null;
    const prefix = `f${turn}`;
    const controls = Object.entries(hint.inputs).map(([key, field]) => fieldControl(prefix, key, field, hooks.upload));
    // a decision's buttons submit the form. Enter in a text field submits with the form's first
    // enabled submit button (Chromium skips disabled ones): with a decision that is a hidden
    // button whose submission is ignored, so Enter never picks a decision
    const decides = Object.values(hint.inputs).some((f) => f.decisions && f.decisions.length > 0);
    this.submit = h('button', { type: 'submit', class: 'primary', text: 'Submit', hidden: decides, tabindex: decides ? -1 : undefined, 'aria-hidden': decides ? 'true' : undefined });
    this.legend = h('legend', { id: `${prefix}-legend`, text: 'The workflow asks' });
    this.fieldset = h('fieldset', {}, [
      this.legend,
      hint.tips ? h('p', { class: 'tips', text: hint.tips }) : null,
      decides ? this.submit : null,
      ...controls.map((c) => c.root),
      // kept in view at the bottom of the conversation while the form is taller than it
      h('p', { class: 'form-actions' }, [decides ? null : this.submit, h('span', { class: 'note', text: 'Fields marked * are required.' })]),
    ]);
    const form = h('form', { class: 'form', 'aria-labelledby': `${prefix}-legend` }, [this.fieldset]);
    this.entry = add(h('li', { class: 'entry form-entry' }, [form]));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (decides && !(e.submitter instanceof HTMLButtonElement && e.submitter.classList.contains('decision'))) return;
      void this.send(form, controls);
    });
    this.entry.scrollIntoView({ block: 'nearest' });
    controls[0]?.focusable.focus({ preventScroll: true });
  }

  /** @param {boolean} busy */
  setBusy(busy) {
    this.submit.disabled = busy;
  }

  /** The countdown under the legend; null takes it away. @param {string | null} text @param {boolean} [due] */
  setCountdown(text, due = false) {
    if (text === null) {
      this.countdown?.remove();
      this.countdown = null;
      return;
    }
    if (!this.countdown) {
      this.countdown = h('p', { class: 'countdown', role: 'timer' });
      this.legend.after(this.countdown);
    }
    this.countdown.textContent = text;
    this.countdown.classList.toggle('due', due);
  }

  /** Replaced by what came next: gone from the conversation. */
  remove() {
    this.done = true;
    this.entry.remove();
  }

  /**
   * Overtaken by a turn committed elsewhere: kept where it is, read-only, saying why. A form
   * being sent from here goes instead (its answers are on screen, marked as not sent).
   * @param {string} why
   */
  freeze(why) {
    if (this.entry.hidden) return this.remove();
    this.done = true;
    this.fieldset.disabled = true;
    this.setCountdown(null);
    this.entry.classList.add('closed');
    this.fieldset.append(h('p', { class: 'closed-note', role: 'status', text: why }));
  }

  /** @param {HTMLFormElement} form @param {FieldControl[]} controls */
  async send(form, controls) {
    if (this.hooks.busy() || this.done) return;
    for (const c of controls) c.showError(null);
    if (!form.reportValidity()) return;
    this.fieldset.disabled = true;
    /** @type {Record<string, unknown>} */
    const inputs = {};
    /** @type {[string, string][]} */
    const rows = [];
    try {
      for (const c of controls) {
        const value = await c.read();
        if (value === undefined) continue;
        inputs[c.key] = value;
        rows.push([c.label, c.describe ? c.describe(value) : display(value)]);
      }
    } catch (error) {
      this.fieldset.disabled = false;
      await this.hooks.unreadable(error);
      return;
    }
    const answers = this.hooks.answersEntry(rows);
    this.entry.after(answers);
    this.entry.hidden = true;
    const outcome = await this.hooks.send(inputs, rows, answers);
    if (outcome.sent || this.done) return; // the run's next state took its place
    // refused, or not sent: the form comes back, to try again
    answers.remove();
    this.entry.hidden = false;
    this.fieldset.disabled = false;
    const problems = outcome.problems ?? [];
    const named = (/** @type {FieldControl} */ c, /** @type {FieldProblem} */ p) => c.key === p.field || p.field.endsWith(`.${c.key}`);
    for (const p of problems) controls.find((c) => named(c, p))?.showError(p.message);
    controls.find((c) => problems.some((p) => named(c, p)))?.focusable.focus();
  }
}
