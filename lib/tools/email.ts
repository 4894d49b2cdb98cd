/**
 * RAGFlow's Email (agent/tools/email.py) as an Agent's tool: the function `email` sends one
 * HTML message (the model writes `to_email`, `cc_email`, `subject`, `content`) through the
 * tenant's SMTP server, which the entry names (`smtp_server`, `smtp_port`, `email`,
 * `smtp_username`, `password`, `sender_name`). Sent, its canvas output is RAGFlow's `success`.
 *
 * - The password is a tenant secret, never the DSL's text: `password: "{secret.NAME}"` names
 *   it, an empty one means the secret `SMTP_PASSWORD`; a literal password is refused at load.
 * - Encrypted only: port 465 speaks TLS from the start, 587 must upgrade with STARTTLS before
 *   the login, and the server's certificate must match its name. Port 25 is refused at load:
 *   AWS Lambda blocks outbound connections to it.
 * - The host is the tenant's, so it goes through the run's SSRF guard, and the connection goes
 *   to the address the guard approved (TLS still verifies the host's name), so a DNS answer
 *   that changes between the check and the connection cannot send it into the VPC.
 * - A 4xx reply or a lost connection is retried (the message was not accepted); a 5xx reply,
 *   a rejected login or a certificate that does not match are told to the model.
 *
 * nodemailer is loaded on the first message, not with the runtime.
 *
 * @example
 *   const tools = createToolRegistry([emailTool()]);
 *   // DSL: {"component_name": "Email", "params": {"smtp_server": "smtp.example.com", "smtp_port": 587,
 *   //        "email": "bot@example.com", "password": "", "sender_name": "Support bot"}}
 */
import { z } from 'zod';
import { parseIp } from '../outbound/ip';
import { type SsrfCheckResult, SsrfBlockedError, type SsrfGuard } from '../outbound/ssrf';
import { ToolError, ToolTransientError } from './errors';
import { credentialParam, functionShape, parseToolArgs, resolveCredential } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolContext, ToolResult } from './types';
import type { RetryPolicy } from './web-service';

export const EMAIL_FUNCTION = 'email';
/** The tenant secret that holds the SMTP password when an entry's `password` is empty. */
export const SMTP_PASSWORD_SECRET = 'SMTP_PASSWORD';
/** RAGFlow's limit on sending (COMPONENT_EXEC_TIMEOUT for Email, 60 s), retries included. */
export const EMAIL_TIMEOUT_MS = 60_000;
/** Each step of the conversation (connecting, the greeting, a reply): RAGFlow's smtplib `timeout=10`. */
const SMTP_STEP_TIMEOUT_MS = 10_000;
/** The most recipients (to and cc) of one message: a model cannot turn the tool into a mailing list. */
export const EMAIL_MAX_RECIPIENTS = 50;

export const EMAIL_DESCRIPTION =
  'The email is a method of electronic communication for sending and receiving information through the Internet. This tool helps users to send emails to one person or to multiple recipients with support for CC, BCC, file attachments, and markdown-to-HTML conversion.';

const EMAIL_PARAMETERS = {
  type: 'object',
  properties: {
    to_email: { type: 'string', description: 'The target email address.' },
    cc_email: { type: 'string', description: 'The other email addresses needs to be send to. Comma splited.' },
    content: { type: 'string', description: 'The content of the email.' },
    subject: { type: 'string', description: 'The subject/title of the email.' },
  },
  required: ['to_email'],
};

/** How a port speaks TLS. */
export type SmtpTlsMode = 'implicit' | 'starttls';

/** The ports an entry may name, and how each speaks TLS. */
export type SmtpPortPolicy = Readonly<Record<number, SmtpTlsMode>>;

/** 465: TLS from the first byte (SMTPS); 587: submission, upgraded with STARTTLS before the login. */
export const SMTP_PORTS: SmtpPortPolicy = { 465: 'implicit', 587: 'starttls' };

export interface EmailOptions {
  /** The ports entries may use. @default SMTP_PORTS (465 implicit TLS, 587 STARTTLS) */
  ports?: SmtpPortPolicy;
  /** Certificates to trust besides the system's (a private relay; tests). The name is verified all the same. @default none */
  tls?: { ca?: string | Buffer | readonly (string | Buffer)[] };
  /** @default 3 attempts, 500 ms doubling */
  retry?: RetryPolicy;
}

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*\.?$/i;
/** An address as a model or a DSL writes it: no display name, no spaces, one @. */
const ADDRESS = /^[^\s@<>,;:"()[\]\\]+@[^\s@<>,;:"()[\]\\]+$/;

/** Whether `text` is one e-mail address as the Email tool takes it (no display name, no spaces, one @). */
export function isEmailAddress(text: string): boolean {
  return ADDRESS.test(text);
}

const required = (description: string) =>
  z
    .string({ error: `${description} does not support empty value.` })
    .trim()
    // an empty value is told once, not also as a malformed one
    .min(1, { message: `${description} does not support empty value.`, abort: true });

function emailParams(ports: SmtpPortPolicy) {
  const allowed = Object.entries(ports).map(([port, mode]) => `${port} (${mode === 'implicit' ? 'implicit TLS' : 'STARTTLS'})`).join(' or ');
  return z.looseObject({
    smtp_server: required('SMTP Server').refine((v) => HOSTNAME.test(v) || parseIp(v.replace(/^\[(.*)\]$/, '$1')) !== null, {
      message: 'SMTP Server must be a host name or an IP address, without scheme or port (e.g. smtp.example.com)',
    }),
    smtp_port: z
      .union([z.number().int(), z.string().trim().regex(/^\d+$/, 'SMTP port must be a number').transform(Number)])
      .nullish()
      .transform((v) => v ?? 465)
      .refine((v) => v in ports, {
        error: (issue) =>
          issue.input === 25
            ? `SMTP port 25 is not supported: AWS Lambda blocks outbound connections to port 25; use ${allowed}`
            : `SMTP port ${String(issue.input)} is not supported: use ${allowed}`,
      }),
    email: required('Email').refine((v) => ADDRESS.test(v), { message: 'Email must be the sender address, e.g. bot@example.com' }),
    smtp_username: z.string().nullish().transform((v) => v?.trim() ?? ''),
    password: credentialParam('password', SMTP_PASSWORD_SECRET),
    sender_name: required('Sender Name'),
    ...functionShape(),
  });
}
export type EmailParams = z.output<ReturnType<typeof emailParams>>;

const emailArgs = z.lazy(() => z.object({
  to_email: z.string().trim().min(1, 'must name at least one address'),
  cc_email: z.string().nullish(),
  subject: z.string().nullish(),
  content: z.string().nullish(),
}));

/** The Email kind: entries are checked against `ports` when the workflow is loaded. */
export function emailTool(options: EmailOptions = {}): ToolKind<EmailParams> {
  const ports = options.ports ?? SMTP_PORTS;
  return {
    name: 'Email',
    // built on first use: the schema is a few dozen zod objects nobody needs at a cold start
    params: z.lazy(() => emailParams(ports)),
    credentials: [{ param: 'password', secret: SMTP_PASSWORD_SECRET }],
    create: (entry) => mailTool(entry, ports, options),
  };
}

function mailTool(entry: ToolEntry<EmailParams>, ports: SmtpPortPolicy, options: EmailOptions): Tool {
  const p = entry.params;
  const name = p.function_name || EMAIL_FUNCTION;
  return {
    name,
    description: p.description || EMAIL_DESCRIPTION,
    parameters: EMAIL_PARAMETERS,
    timeoutMs: EMAIL_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, emailArgs, args);
      const to = addresses(name, 'to_email', a.to_email);
      const cc = addresses(name, 'cc_email', a.cc_email ?? '');
      if (to.length + cc.length > EMAIL_MAX_RECIPIENTS) {
        throw new ToolError(`tool "${name}": a message goes to at most ${EMAIL_MAX_RECIPIENTS} recipients, this one names ${to.length + cc.length}`);
      }
      const password = (await resolveCredential(name, 'SMTP', { name: 'password', value: p.password, defaultSecret: SMTP_PASSWORD_SECRET }, ctx)) as string;
      if (!ctx.services.guard) throw new ToolError(`tool "${name}": this run has no outbound guard, so it connects to no SMTP server`);
      const server = { host: p.smtp_server.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, ''), port: p.smtp_port, mode: ports[p.smtp_port] as SmtpTlsMode };
      const message = {
        from: { name: p.sender_name, address: p.email },
        to,
        ...(cc.length > 0 ? { cc } : {}),
        // RAGFlow's defaults when the model leaves them out; a header is one line
        subject: (a.subject ?? 'No Subject').replace(/[\r\n]+/g, ' '),
        html: a.content ?? 'No content provided',
      };
      const sent = await withRetries(name, ctx, options.retry ?? {}, password, async () => {
        const target = await checkedHost(name, ctx.services.guard!, server.host);
        return send(server, target, { user: p.smtp_username || p.email, pass: password }, message, options, ctx.signal);
      });
      const refused = sent.rejected.length > 0 ? ` The server did not accept: ${sent.rejected.join(', ')}.` : '';
      return {
        kind: 'result',
        content: `The email "${message.subject}" was sent to ${to.join(', ')}${cc.length > 0 ? `, cc ${cc.join(', ')}` : ''}.${refused}`,
        data: { success: true, message_id: sent.messageId, accepted: sent.accepted, rejected: sent.rejected },
        outputs: { success: true },
      };
    },
  };
}

/** `text` split on commas (RAGFlow's "comma splited") and semicolons, each an address. */
function addresses(tool: string, field: string, text: string): string[] {
  const list = text.split(/[,;]/).map((a) => a.trim()).filter(Boolean);
  const bad = list.find((a) => !ADDRESS.test(a));
  if (bad !== undefined) throw new ToolError(`tool "${tool}": invalid arguments: ${field}: ${JSON.stringify(bad.slice(0, 100))} is not an e-mail address`);
  return list;
}

/** The address to connect to: the host through the run's guard, which resolves it once. */
async function checkedHost(tool: string, guard: SsrfGuard, host: string): Promise<SsrfCheckResult> {
  try {
    return await guard.check(`https://${host.includes(':') ? `[${host}]` : host}/`);
  } catch (error) {
    if (error instanceof SsrfBlockedError) throw new ToolError(`tool "${tool}": ${error.message.replace('outbound request refused', 'SMTP server refused')}`, { cause: error });
    throw error;
  }
}

interface SentMessage {
  messageId: string;
  accepted: string[];
  rejected: string[];
}

let nodemailer: Promise<typeof import('nodemailer')> | undefined;
const loadNodemailer = () => (nodemailer ??= import('nodemailer'));

async function send(
  server: { host: string; port: number; mode: SmtpTlsMode },
  target: SsrfCheckResult,
  auth: { user: string; pass: string },
  message: { from: { name: string; address: string }; to: string[]; cc?: string[]; subject: string; html: string },
  options: EmailOptions,
  signal: AbortSignal,
): Promise<SentMessage> {
  const { createTransport } = await loadNodemailer();
  const byName = parseIp(server.host) === null;
  const transport = createTransport({
    // the address the guard approved; the name is what TLS verifies
    host: target.address,
    port: server.port,
    secure: server.mode === 'implicit',
    requireTLS: server.mode === 'starttls',
    ...(byName ? { servername: server.host } : {}),
    tls: {
      ...(byName ? { servername: server.host } : {}),
      minVersion: 'TLSv1.2',
      ...(options.tls?.ca ? { ca: options.tls.ca as string | Buffer | (string | Buffer)[] } : {}),
    },
    auth,
    connectionTimeout: SMTP_STEP_TIMEOUT_MS,
    greetingTimeout: SMTP_STEP_TIMEOUT_MS,
    socketTimeout: SMTP_STEP_TIMEOUT_MS,
    socketCloseTimeout: 0,
    logger: false,
    debug: false,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  try {
    const info = await transport.sendMail({ ...message, signal });
    return { messageId: info.messageId, accepted: info.accepted.map(String), rejected: info.rejected.map(String) };
  } finally {
    transport.close();
  }
}

/**
 * `attempt` until it succeeds, a permanent failure, or the last attempt; the backoff waits on
 * the call's timer. What is still transient after the last attempt fails the turn.
 */
async function withRetries<T>(tool: string, ctx: ToolContext, policy: RetryPolicy, password: string, attempt: () => Promise<T>): Promise<T> {
  const attempts = policy.attempts ?? 3;
  const backoffMs = policy.backoffMs ?? 500;
  for (let n = 1; ; n++) {
    let failure: ToolError | ToolTransientError;
    try {
      return await attempt();
    } catch (error) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      if (error instanceof ToolError) throw error;
      failure = smtpFailure(tool, error, password);
      if (failure instanceof ToolError) throw failure;
    }
    if (n >= attempts) throw failure;
    await (ctx.wait ?? realWait)(backoffMs * 2 ** (n - 1));
  }
}

/** A host that gives no `wait` (a tool called outside `callTool`) waits on the real clock. */
const realWait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What nodemailer reports, as an error naming the step; never the password, whatever the server echoed. */
function smtpFailure(tool: string, error: unknown, password: string): ToolError | ToolTransientError {
  const e = (error ?? {}) as { code?: string; responseCode?: number; response?: string; permanent?: boolean; message?: string; cause?: unknown };
  const scrub = (text: string) => text.split(password).join('***').replace(/\s+/g, ' ').trim().slice(0, 300);
  const reply = e.response ? scrub(e.response) : undefined;
  const prefix = `tool "${tool}":`;
  if (e.code === 'EAUTH' && (e.responseCode === undefined || e.responseCode >= 500)) {
    return new ToolError(`${prefix} SMTP authentication failed${reply ? ` (${reply})` : ''}: check the sender address or smtp_username, and the password secret`);
  }
  const detail = scrub(e.message ?? String(error));
  // a refused STARTTLS carries the server's reply too, but what failed is the encryption
  if (e.code === 'ETLS' || (e.responseCode === undefined && /certificate|altnames|self[- ]signed|ssl|tls/i.test(detail))) {
    return new ToolError(`${prefix} no secure connection to the SMTP server: ${detail}`);
  }
  if (e.responseCode !== undefined) {
    const permanent = e.permanent ?? (e.responseCode >= 500 && e.responseCode !== 503);
    return permanent
      ? new ToolError(`${prefix} the SMTP server refused the message: ${reply ?? e.responseCode}`)
      : new ToolTransientError(`${prefix} the SMTP server answered ${reply ?? e.responseCode}`);
  }
  if (e.code === 'ECONNECTION' || e.code === 'ESOCKET' || e.code === 'ETIMEDOUT' || e.code === 'EDNS') {
    return new ToolTransientError(`${prefix} the SMTP server could not be reached: ${detail}`);
  }
  return new ToolError(`${prefix} the message could not be sent: ${detail}`);
}
