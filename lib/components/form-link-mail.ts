/**
 * UserFillUp's `form_link_email` (Easel's addition): when the run pauses at the form, its link
 * (a form link, answered without a key) is e-mailed. Who to send to is a literal address, a
 * reference to a variable (which may hold one address, several separated by commas, or a
 * list), or a list of both; subject and body have defaults and may reference variables too.
 * Rendered here, at the pause, against the run; the link is made and the mail sent from the
 * committed turn (lib/turns/form-link-mail.ts), through the Email tool's sending code.
 *
 * @example
 *   "form_link_email": {"to": ["approvals@example.com", "{begin@manager_email}"], "subject": "Refund {begin@order} waits for you"}
 */
import { z } from 'zod';
import type { ComponentContext, PauseMail } from '../canvas/component';
import { exactReference, splitTemplate, valueToText } from '../canvas/references';
import { isEmailAddress } from '../tools/email';

/** A link's lifetime when nothing says otherwise: 7 days (as a link made through the API). */
export const DEFAULT_MAIL_LINK_SECONDS = 7 * 86_400;
export const MAX_MAIL_RECIPIENTS = 20;
/** What stands for the link, and for its expiry, in a body. */
export const FORM_LINK_PLACEHOLDER = '{form_link}';
export const EXPIRES_AT_PLACEHOLDER = '{expires_at}';

const DEFAULT_SUBJECT = 'A form is waiting for your answer';

export const formLinkEmailParam = z.lazy(() => z
  .strictObject({
    to: z.union([z.string().trim().min(1).max(1000), z.array(z.string().trim().min(1).max(1000)).min(1).max(MAX_MAIL_RECIPIENTS)]),
    subject: z.string().max(500).nullish(),
    /** HTML; values of references are escaped. */
    body: z.string().max(20_000).nullish(),
    expires_in_seconds: z.number().int().min(60).max(30 * 86_400).nullish(),
  })
  .nullish());

export type FormLinkEmail = NonNullable<z.output<typeof formLinkEmailParam>>;

/**
 * The mail of one pause: its recipients (and what gave none), subject and body, rendered against
 * the run; `seconds` is the link's lifetime when the param does not set one.
 */
export async function renderPauseMail(mail: FormLinkEmail, ctx: ComponentContext, tips: string, seconds: number): Promise<Omit<PauseMail, 'component_id'>> {
  const to: string[] = [];
  const problems: string[] = [];
  for (const entry of Array.isArray(mail.to) ? mail.to : [mail.to]) {
    const value = exactReference(entry) ? await ctx.get(entry) : await ctx.render(entry);
    const texts = (Array.isArray(value) ? value : [value]).map(valueToText).flatMap((t) => t.split(/[,;]/)).map((t) => t.trim()).filter(Boolean);
    if (texts.length === 0) problems.push(`${entry} gave no address`);
    for (const text of texts) {
      if (!isEmailAddress(text)) problems.push(`${entry} gave ${JSON.stringify(text.slice(0, 100))}, which is not an e-mail address`);
      else if (!to.includes(text)) to.push(text);
    }
  }
  if (to.length > MAX_MAIL_RECIPIENTS) {
    problems.push(`${to.length - MAX_MAIL_RECIPIENTS} addresses past the first ${MAX_MAIL_RECIPIENTS} are left out`);
    to.length = MAX_MAIL_RECIPIENTS;
  }
  const subject = (mail.subject ? await ctx.render(mail.subject) : '').replace(/\s+/g, ' ').trim() || DEFAULT_SUBJECT;
  const body = mail.body ? await renderHtml(mail.body, ctx) : defaultBody(tips);
  return { to, problems, subject, body, expires_in_seconds: mail.expires_in_seconds ?? seconds };
}

/** The template with each reference's value escaped as HTML: a value cannot add markup to the mail. */
async function renderHtml(template: string, ctx: ComponentContext): Promise<string> {
  let html = '';
  for (const part of splitTemplate(template)) html += 'text' in part ? part.text : escapeHtml(valueToText(await ctx.get(part.source)));
  return html;
}

function defaultBody(tips: string): string {
  const asked = tips.trim() ? `<p>${escapeHtml(tips.trim()).replace(/\n/g, '<br>')}</p>\n` : '';
  return `${asked}<p><a href="${FORM_LINK_PLACEHOLDER}">Open the form</a> to answer.</p>\n<p>The link works once, until ${EXPIRES_AT_PLACEHOLDER}.</p>`;
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}
