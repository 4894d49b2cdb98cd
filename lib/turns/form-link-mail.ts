/**
 * Form links by e-mail (UserFillUp `form_link_email`): when a turn pauses at such a form, the
 * form's link is e-mailed to the addresses the form named, once the turn has committed.
 *
 * - **Before the commit** (`checkPauseMail`): whether the mail can go — this server makes form
 *   links, the tenant has configured e-mail, the form gave addresses — is said in the turn's
 *   response, `form_link_email: {status: "sending", recipients}` or `{status: "not_sent",
 *   reason}`. The pause happens either way.
 * - **After the commit** (`sendPauseMail`): the link is made from the committed turn (its run,
 *   turn and time: the same link whoever makes it) and sent through the Email tool's sending
 *   code, with the tenant's settings as the Email tool reads them: the tenant secret
 *   `SMTP_SETTINGS` holds an Email entry's params as JSON (`smtp_server`, `smtp_port`, `email`,
 *   `sender_name`, `smtp_username`; `password` empty or `{secret.NAME}`), the password is the
 *   secret `SMTP_PASSWORD` (or the one named). TLS, the port policy, the SSRF guard and the
 *   retries are the Email tool's.
 * - **Once per turn**: each form's mail has a mark in the run's partition (store/pause-mail.ts),
 *   taken before sending and settled after. A turn handed back again — a request retried with
 *   its Idempotency-Key, a queue message redelivered — tries again (`resendPauseMail`) only if
 *   the first sender did not get as far as sending, or met a transient failure; a mark held by
 *   a live sender, or settled, turns it away. The one window for a second message: a sender
 *   that dies after the SMTP server took the message and before it settles the mark, whose
 *   lease then runs out.
 * - Nothing here throws after the commit: a failure is logged and kept on the mark; the turn
 *   stands.
 */
import { randomBytes } from 'node:crypto';
import type { PauseMail } from '../canvas';
import { isRecord } from '../canvas/references';
import { EXPIRES_AT_PLACEHOLDER, FORM_LINK_PLACEHOLDER } from '../components/form-link-mail';
import type { ComponentServices } from '../components/services';
import type { SignedTokens } from '../secrets/signed-tokens';
import { getPauseMail, type PauseMailKey, type PauseMailMark, settlePauseMail, takePauseMail } from '../store/pause-mail';
import { loadSession } from '../store/sessions';
import { callTool } from '../tools/call';
import { SMTP_PASSWORD_SECRET } from '../tools/email';
import { SECRET_REFERENCE } from '../tools/params';
import { builtinTools, type ToolRegistry } from '../tools/registry';
import type { Tool, ToolServices } from '../tools/types';
import { pauseLink } from './form-links';
import type { TurnResponse } from './response';
import type { TurnEngine, TurnResult } from './turn-engine';

/** The tenant secret that holds the Email settings form links are sent with. */
export const SMTP_SETTINGS_SECRET = 'SMTP_SETTINGS';
/** How long a sender holds a mark before another may take it over. */
export const PAUSE_MAIL_LEASE_MS = 5 * 60_000;

/** What the server needs to make and send form links. */
export interface FormLinkSettings {
  tokens: SignedTokens;
  /** What links point at (EASEL_FORM_BASE_URL, else EASEL_PUBLIC_URL); absent: a path. */
  baseUrl?: string;
  /** Told what happened to each mail after the commit. */
  log?: (message: string, fields: Record<string, unknown>) => void;
}

/** What a turn's response says of its form link's e-mail. */
export type FormLinkEmailStatus = { status: 'sending'; recipients: number; problems?: string[] } | { status: 'not_sent'; reason: string };

/** Before the commit: whether the pause's mails can go, and to how many, or why not. */
export async function checkPauseMail(engine: TurnEngine, tenant: string, mails: readonly PauseMail[]): Promise<FormLinkEmailStatus> {
  const problems = mails.flatMap((m) => m.problems);
  const recipients = new Set(mails.flatMap((m) => m.to)).size;
  if (recipients === 0) return { status: 'not_sent', reason: `the form gave no address to send its link to: ${problems.join('; ') || 'none was named'}` };
  if (!engine.formLinks) return { status: 'not_sent', reason: 'this server makes no form links (it runs without server keys)' };
  const mailer = await emailOf(servicesOf(engine, tenant));
  if ('reason' in mailer) return { status: 'not_sent', reason: mailer.reason };
  return { status: 'sending', recipients, ...(problems.length > 0 ? { problems } : {}) };
}

/** The paused turn just committed, and the mails its forms asked for. */
export interface CommittedPause {
  tenant: string;
  workflowId: string;
  runId: string;
  turn: number;
  /** The turn's `created_at`: links count their lifetime from it. */
  pausedAt: string;
  mails: readonly PauseMail[];
}

/** After the commit: each form's mail, once. Never throws. */
export async function sendPauseMail(engine: TurnEngine, pause: CommittedPause): Promise<void> {
  const settings = engine.formLinks;
  if (!settings) return;
  const log = settings.log ?? (() => undefined);
  for (const mail of pause.mails) {
    if (mail.to.length === 0) continue;
    const key: PauseMailKey = { tenant: pause.tenant, runId: pause.runId, turn: pause.turn, componentId: mail.component_id };
    const fields = { tenant: pause.tenant, run_id: pause.runId, turn_number: pause.turn, component_id: mail.component_id };
    try {
      const expiresAt = Math.floor(Date.parse(pause.pausedAt) / 1000) + mail.expires_in_seconds;
      if (expiresAt * 1000 <= now(engine)) {
        log('form link mail not sent', { ...fields, reason: 'the link has expired' });
        continue;
      }
      const owner = randomBytes(16).toString('hex');
      if (!(await takePauseMail(engine.store, key, owner, PAUSE_MAIL_LEASE_MS, expiresAt))) continue;
      const outcome = await deliver(engine, pause, mail, settings);
      await settlePauseMail(engine.store, key, owner, outcome);
      log(outcome.status === 'sent' ? 'form link mail sent' : 'form link mail not sent', { ...fields, ...outcome });
    } catch (error) {
      log('form link mail not sent', { ...fields, reason: error instanceof Error ? error.message : String(error) });
    }
  }
}

/**
 * A committed turn handed back again (a retry with its key, a redelivered message): the mails of
 * its pause that its first delivery did not get to send. Only while the run still waits there
 * (once it moved on, the link answers nothing). Never throws.
 */
export async function resendPauseMail(engine: TurnEngine, tenant: string, result: TurnResult): Promise<void> {
  const r = result.response;
  if (r.form_link_email?.status !== 'sending' || !engine.formLinks) return;
  try {
    const { latest, head } = await loadSession(engine.store, tenant, r.run_id, 0);
    const state = latest?.state;
    if (head.turn !== r.turn_number || !isRecord(state) || !isRecord(state.prompt) || !Array.isArray(state.prompt.mail)) return;
    await sendPauseMail(engine, { tenant, workflowId: r.workflow_id, runId: r.run_id, turn: r.turn_number, pausedAt: r.created_at, mails: state.prompt.mail as PauseMail[] });
  } catch (error) {
    engine.formLinks.log?.('form link mail not sent', { tenant, run_id: r.run_id, turn_number: r.turn_number, reason: error instanceof Error ? error.message : String(error) });
  }
}

/** What became of a turn's form's mail: its mark, if it was taken. */
export function pauseMailOf(engine: TurnEngine, tenant: string, response: Pick<TurnResponse, 'run_id' | 'turn_number'>, componentId: string): Promise<PauseMailMark | undefined> {
  return getPauseMail(engine.store, { tenant, runId: response.run_id, turn: response.turn_number, componentId });
}

async function deliver(engine: TurnEngine, pause: CommittedPause, mail: PauseMail, settings: FormLinkSettings): Promise<{ status: 'sent' | 'failed' | 'retry'; error?: string; accepted?: string[] }> {
  const services = servicesOf(engine, pause.tenant);
  const mailer = await emailOf(services);
  if ('reason' in mailer) return { status: 'failed', error: mailer.reason };
  const link = await pauseLink(settings.tokens, { tenant: pause.tenant, workflowId: pause.workflowId, runId: pause.runId, turn: pause.turn, pausedAt: pause.pausedAt, seconds: mail.expires_in_seconds }, settings.baseUrl);
  const url = link.url.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
  const body = mail.body.includes(FORM_LINK_PLACEHOLDER) ? mail.body : `${mail.body}\n<p><a href="${FORM_LINK_PLACEHOLDER}">${FORM_LINK_PLACEHOLDER}</a></p>`;
  const content = body.split(FORM_LINK_PLACEHOLDER).join(url).split(EXPIRES_AT_PLACEHOLDER).join(link.expires_at);
  try {
    const outcome = await mailer.send({ to_email: mail.to.join(','), subject: mail.subject, content });
    if (outcome.kind === 'result') {
      const data = isRecord(outcome.data) ? outcome.data : {};
      return { status: 'sent', accepted: Array.isArray(data.accepted) ? data.accepted.map(String) : mail.to };
    }
    return { status: 'failed', error: outcome.kind === 'error' ? outcome.error.message : 'the Email tool did not send it' };
  } catch (error) {
    // transient (the server unreachable, a 4xx reply after the Email tool's retries): a later delivery of the turn may try again
    return { status: 'retry', error: error instanceof Error ? error.message : String(error) };
  }
}

type Mailer = { send(args: Record<string, unknown>): ReturnType<typeof callTool> } | { reason: string };

/** The tenant's Email tool, from its `SMTP_SETTINGS`, checked as the Email tool checks an entry; or why there is none. */
async function emailOf(services: ComponentServices): Promise<Mailer> {
  const registry: ToolRegistry = services.tools ?? builtinTools;
  const kind = registry.kind('Email');
  if (!kind) return { reason: 'this server has no Email tool' };
  if (!services.secret) return { reason: "this server reads no tenant secrets, where the e-mail settings are kept" };
  if (!services.guard) return { reason: 'this server has no outbound guard, so it connects to no SMTP server' };
  const raw = await services.secret(SMTP_SETTINGS_SECRET);
  if (raw === undefined || raw.trim() === '') {
    return { reason: `e-mail is not configured: set the tenant secret ${SMTP_SETTINGS_SECRET} (the Email tool's settings as JSON: smtp_server, smtp_port, email, sender_name, smtp_username) and ${SMTP_PASSWORD_SECRET}` };
  }
  let settings: unknown;
  try {
    settings = JSON.parse(raw);
  } catch {
    return { reason: `the tenant secret ${SMTP_SETTINGS_SECRET} is not JSON` };
  }
  const parsed = kind.params.safeParse(settings);
  if (!parsed.success) {
    return { reason: `the tenant secret ${SMTP_SETTINGS_SECRET} does not fit the Email tool: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'settings'}: ${i.message}`).join('; ')}` };
  }
  const params = parsed.data as { password?: string };
  const passwordSecret = SECRET_REFERENCE.exec(params.password ?? '')?.[1] ?? SMTP_PASSWORD_SECRET;
  if (!(await services.secret(passwordSecret))?.trim()) return { reason: `e-mail is not configured: the tenant secret ${passwordSecret} (the SMTP password) is not set` };
  const tool: Tool = kind.create({ component_name: 'Email', name: 'Email', params: parsed.data });
  const toolServices: ToolServices = services;
  return {
    send: (args) =>
      callTool(tool, args, { signal: new AbortController().signal, services: toolServices, componentId: 'form_link_email', ordinal: 0, path: [], recordUsage: () => undefined }, registry),
  };
}

function servicesOf(engine: TurnEngine, tenant: string): ComponentServices {
  return (engine.servicesFor?.(tenant) ?? engine.services) as ComponentServices;
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
