/**
 * Form links: a capability to answer one pause of one run without an API key. The token names
 * the tenant, workflow, run, the turn the run waits after and an expiry, signed with a server
 * key (purpose `form-link`, lib/secrets/signed-tokens.ts): nothing is stored, and the same pause
 * with the same lifetime always yields the same link, so a retried request hands out the same
 * URL. A link answers the form of its turn only: once the run moves on (whoever answered) the
 * turn it names is gone, so it works once, and it grants nothing else (no history, no other run).
 *
 * Token: `fl1.<base64url JSON {t, w, r, n, e}>.<key id>.<mac>`. The page it opens keeps it in the
 * URL's fragment, which browsers never send, and hands it to the API in the
 * `Easel-Form-Token` header, so it stays out of request paths and access logs.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ServerKeySet } from '../secrets/server-keys';
import { type SignedTokens, signedTokens } from '../secrets/signed-tokens';

export const FORM_TOKEN_HEADER = 'easel-form-token';
/** The hosted form page, below the form base URL; the token goes in the fragment. */
export const FORM_PAGE_PATH = '/playground/form';

/** A link lives 7 days unless asked otherwise, 30 at most. */
export const DEFAULT_LINK_SECONDS = 7 * 86_400;
export const MAX_LINK_SECONDS = 30 * 86_400;
export const MIN_LINK_SECONDS = 60;

/** What a link grants: an answer to the pause after `turn` of this run. */
export interface FormLink {
  tenant: string;
  workflowId: string;
  runId: string;
  /** The run's turn when the link was made: the answer is turn `turn + 1`. */
  turn: number;
  /** Epoch seconds. */
  expiresAt: number;
  /** Stable id of the link (the audit trail's actor id): a digest of what it names. */
  linkId: string;
}

const Subject = z.lazy(() => z.object({
  t: z.string().min(1).max(256),
  w: z.string().min(1).max(128),
  r: z.string().regex(/^[0-9a-f]{32}$/),
  n: z.number().int().min(0),
  e: z.number().int().positive(),
}));

/** Subjects grow with the tenant's and workflow's ids: allowed up to this many characters. */
export const FORM_SUBJECT_MAX = 600;

/** The tokens of form links, under the server key of their own purpose. */
export function formLinkTokens(serverKey: (purpose: string) => Promise<ServerKeySet>, now: () => number = Date.now): SignedTokens {
  return signedTokens(serverKey, 'form-link', 'fl1', now, { maxSubjectLength: FORM_SUBJECT_MAX });
}

/** The URL of the page that answers a link: `<base>/playground/form#<token>` (a path when there is no base). */
export function formPageUrl(baseUrl: string | undefined, token: string): string {
  return `${baseUrl ?? ''}${FORM_PAGE_PATH}#${token}`;
}

/**
 * The link to the form a run paused at after `turn`, counted `seconds` from `pausedAt` (ISO):
 * the same pause and lifetime give the same link.
 */
export async function pauseLink(tokens: SignedTokens, pause: { tenant: string; workflowId: string; runId: string; turn: number; pausedAt: string; seconds: number }, baseUrl?: string) {
  const expiresAt = Math.floor(Date.parse(pause.pausedAt) / 1000) + pause.seconds;
  const { token, link } = await mintFormLink(tokens, { tenant: pause.tenant, workflowId: pause.workflowId, runId: pause.runId, turn: pause.turn, expiresAt });
  return { url: formPageUrl(baseUrl, token), token, link_id: link.linkId, run_id: pause.runId, turn_number: pause.turn, expires_at: new Date(expiresAt * 1000).toISOString() };
}

export function formLinkId(link: Omit<FormLink, 'linkId'>): string {
  return createHash('sha256').update(JSON.stringify([link.tenant, link.workflowId, link.runId, link.turn, link.expiresAt])).digest('hex').slice(0, 20);
}

export async function mintFormLink(tokens: SignedTokens, link: Omit<FormLink, 'linkId'>): Promise<{ token: string; link: FormLink }> {
  const subject = Buffer.from(JSON.stringify({ t: link.tenant, w: link.workflowId, r: link.runId, n: link.turn, e: link.expiresAt })).toString('base64url');
  return { token: await tokens.sign(link.tenant, subject), link: { ...link, linkId: formLinkId(link) } };
}

/** The link a token grants, or null for anything that is not a valid token of ours (tampered, another kind, an old key). Expiry is the caller's to judge. */
export async function readFormLink(tokens: SignedTokens, token: string): Promise<FormLink | null> {
  const subject = tokens.subjectOf(token);
  if (!subject) return null;
  let fields: z.output<typeof Subject>;
  try {
    const parsed = Subject.safeParse(JSON.parse(Buffer.from(subject, 'base64url').toString('utf8')));
    if (!parsed.success) return null;
    fields = parsed.data;
  } catch {
    return null;
  }
  if ((await tokens.verify(fields.t, token)) !== subject) return null;
  const link = { tenant: fields.t, workflowId: fields.w, runId: fields.r, turn: fields.n, expiresAt: fields.e };
  return { ...link, linkId: formLinkId(link) };
}
