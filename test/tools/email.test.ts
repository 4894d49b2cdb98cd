/**
 * Email against real SMTP servers on 127.0.0.1 (nodemailer's smtp-server): STARTTLS and
 * implicit TLS with a certificate made for the test, the login with the tenant's secret, the
 * message as received, the host through the run's SSRF guard, SMTP replies classified, a
 * stalled server timing out, and an Agent sending a message through a local model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { type Resolver, SsrfGuard } from '../../lib/outbound/ssrf';
import {
  builtinToolKinds,
  callTool,
  createToolRegistry,
  EMAIL_MAX_RECIPIENTS,
  type EmailOptions,
  type EmailParams,
  emailTool,
  SMTP_PASSWORD_SECRET,
  type Tool,
  type ToolContext,
  ToolError,
  type ToolRegistry,
  ToolTimeoutError,
  ToolTransientError,
} from '../../lib/tools';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { selfSignedCertificate } from '../helpers/self-signed';
import { testServices } from '../helpers/services';
import { SmtpTestServer } from '../helpers/smtp-server';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer, skippingTimer } from './support';

const SENDER = 'bot@example.com';
const SMTP_TEST_PASSWORD = 'smtp-test-PASSWORD-never-shown-7731';
const certificate = selfSignedCertificate(['smtp.test']);

let starttls: SmtpTestServer;
let implicit: SmtpTestServer;
let model: OpenAiServer;
beforeAll(async () => {
  const server = { key: certificate.key, cert: certificate.cert, user: SENDER, password: SMTP_TEST_PASSWORD };
  [starttls, implicit, model] = await Promise.all([SmtpTestServer.start({ ...server, secure: false }), SmtpTestServer.start({ ...server, secure: true }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([starttls.close(), implicit.close(), model.close()]);
});
beforeEach(() => {
  starttls.reset();
  implicit.reset();
});

/** The test servers' ports in the roles of 587 and 465, and the test certificate trusted. */
function kind(options: EmailOptions = {}) {
  return emailTool({ ports: { [implicit.port]: 'implicit', [starttls.port]: 'starttls' }, tls: { ca: certificate.cert }, ...options });
}

function entryParams(params: Record<string, unknown> = {}): Record<string, unknown> {
  return { smtp_server: 'smtp.test', smtp_port: starttls.port, email: SENDER, password: '', sender_name: 'Support Bot', ...params };
}

function mailer(params: Record<string, unknown> = {}, options: EmailOptions = {}): Tool {
  const k = kind(options);
  return k.create({ component_name: 'Email', name: 'Email', params: k.params.parse(entryParams(params)) as EmailParams });
}

/** `smtp.test` (and `wrong.test`) are the local servers' host, let through by name; the system's DNS knows neither. */
function smtpGuard(): SsrfGuard & { lookups: string[] } {
  const lookups: string[] = [];
  const resolve: Resolver = async (host) => {
    lookups.push(host);
    if (host === 'smtp.test' || host === 'wrong.test') return [{ address: '127.0.0.1', family: 4 }];
    throw new Error(`ENOTFOUND ${host}`);
  };
  return Object.assign(new SsrfGuard({ allow: ['smtp.test', 'wrong.test'], resolve }), { lookups });
}

function context(secrets: Record<string, string> = { [SMTP_PASSWORD_SECRET]: SMTP_TEST_PASSWORD }, guard: SsrfGuard | null = smtpGuard()): ToolContext {
  return {
    signal: new AbortController().signal,
    services: { secret: (name) => secrets[name], ...(guard ? { guard } : {}) },
    componentId: 'Agent:Assistant',
    ordinal: 0,
    path: [],
    recordUsage: () => undefined,
  };
}

const registry = (): ToolRegistry => createToolRegistry([], { timer: skippingTimer().timer });
const MESSAGE = { to_email: 'alice@example.org', cc_email: 'bob@example.org, carol@example.net', subject: 'Your order', content: '<p>It ships <b>today</b>.</p>' };

async function failure(tool: Tool, args: Record<string, unknown>, ctx = context()): Promise<string> {
  const outcome = await callTool(tool, args, ctx, registry());
  if (outcome.kind !== 'error') throw new Error(`expected an error, got ${outcome.kind}`);
  expect(outcome.error).toBeInstanceOf(ToolError);
  expect(outcome.error.message).not.toContain(SMTP_TEST_PASSWORD);
  return outcome.error.message;
}

describe('Email', () => {
  it('describes itself as RAGFlow’s email function', () => {
    const tool = mailer();
    expect(tool.name).toBe('email');
    expect(tool.description).toMatch(/^The email is a method of electronic communication/);
    expect(tool.parameters).toMatchObject({
      required: ['to_email'],
      properties: { to_email: { type: 'string' }, cc_email: { type: 'string', description: 'The other email addresses needs to be send to. Comma splited.' }, subject: {}, content: {} },
    });
  });

  it('sends over STARTTLS, logged in with the tenant’s secret: From with the sender name, To, Cc, Subject and the HTML body', async () => {
    const guard = smtpGuard();
    const outcome = await callTool(mailer(), MESSAGE, context(undefined, guard), registry());
    expect(outcome).toEqual({
      kind: 'result',
      content: 'The email "Your order" was sent to alice@example.org, cc bob@example.org, carol@example.net.',
      data: { success: true, message_id: expect.stringMatching(/^<.+@example\.com>$/), accepted: ['alice@example.org', 'bob@example.org', 'carol@example.net'], rejected: [] },
      outputs: { success: true },
    });
    expect(starttls.logins).toEqual([{ method: 'PLAIN', username: SENDER, accepted: true, secure: true }]);
    const [mail] = starttls.mails;
    expect(mail).toMatchObject({ from: SENDER, recipients: ['alice@example.org', 'bob@example.org', 'carol@example.net'], secure: true, user: SENDER });
    expect(mail?.headers).toMatchObject({
      from: `Support Bot <${SENDER}>`,
      to: 'alice@example.org',
      cc: 'bob@example.org, carol@example.net',
      subject: 'Your order',
      'content-type': 'text/html; charset=utf-8',
    });
    expect(mail?.body).toBe('<p>It ships <b>today</b>.</p>');
    // resolved once, by the guard; the connection went to the address it approved (the system's DNS knows no smtp.test)
    expect(guard.lookups).toEqual(['smtp.test']);
  });

  it('sends over implicit TLS, logging in as smtp_username; RAGFlow’s defaults fill a missing subject and body', async () => {
    await callTool(mailer({ smtp_port: implicit.port, smtp_username: SENDER, sender_name: 'Équipe Café' }), { to_email: 'alice@example.org', subject: 'Café\r\nBcc: eve@example.org' }, context(), registry());
    expect(starttls.mails).toHaveLength(0);
    expect(implicit.logins).toEqual([{ method: 'PLAIN', username: SENDER, accepted: true, secure: true }]);
    const [mail] = implicit.mails;
    expect(mail?.recipients).toEqual(['alice@example.org']);
    expect(mail?.headers.from).toBe(`Équipe Café <${SENDER}>`);
    // a line break in the subject cannot start a header of its own
    expect(mail?.headers.subject).toBe('Café Bcc: eve@example.org');
    expect(mail?.headers.bcc).toBeUndefined();
    await callTool(mailer({ smtp_port: implicit.port }), { to_email: 'alice@example.org' }, context(), registry());
    expect(implicit.mails[1]?.headers.subject).toBe('No Subject');
    expect(implicit.mails[1]?.body).toBe('No content provided');
  });

  it('verifies the server’s certificate against the host’s name, not the address it connects to', async () => {
    const wrongName = await failure(mailer({ smtp_server: 'wrong.test' }), MESSAGE);
    expect(wrongName).toMatch(/^tool "email": no secure connection to the SMTP server: .*wrong\.test.*smtp\.test/);
    const untrusted = await failure(mailer({}, { tls: {} }), MESSAGE);
    expect(untrusted).toMatch(/^tool "email": no secure connection to the SMTP server: .*self[- ]signed certificate/);
    expect(starttls.logins).toHaveLength(0);
    expect(starttls.mails).toHaveLength(0);
  });

  it('never logs in over a connection that did not upgrade to TLS', async () => {
    const plain = await SmtpTestServer.start({ secure: false, key: certificate.key, cert: certificate.cert, user: SENDER, password: SMTP_TEST_PASSWORD, offerStarttls: false });
    try {
      const tool = emailTool({ ports: { [plain.port]: 'starttls' }, tls: { ca: certificate.cert } });
      const message = await failure(tool.create({ component_name: 'Email', name: 'Email', params: tool.params.parse(entryParams({ smtp_port: plain.port })) }), MESSAGE);
      expect(message).toMatch(/^tool "email": no secure connection to the SMTP server: .*STARTTLS/);
      expect(plain.connections).toBe(1);
      expect(plain.logins).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it('refuses bad arguments before connecting', async () => {
    expect(await failure(mailer(), { subject: 'x' })).toMatch(/invalid arguments: to_email:/);
    expect(await failure(mailer(), { to_email: 'Alice <alice@example.org>' })).toBe('tool "email": invalid arguments: to_email: "Alice <alice@example.org>" is not an e-mail address');
    expect(await failure(mailer(), { to_email: 'a@example.org', cc_email: 'b@example.org\r\nBcc: c@example.org' })).toMatch(/cc_email: .* is not an e-mail address/);
    const many = Array.from({ length: EMAIL_MAX_RECIPIENTS }, (_, i) => `r${i}@example.org`).join(',');
    expect(await failure(mailer(), { to_email: 'a@example.org', cc_email: many })).toBe(`tool "email": a message goes to at most ${EMAIL_MAX_RECIPIENTS} recipients, this one names ${EMAIL_MAX_RECIPIENTS + 1}`);
    expect(starttls.connections).toBe(0);
  });
});

describe('the SMTP password', () => {
  it('is the secret password names, resolved at call time', async () => {
    await callTool(mailer({ password: '{secret.SUPPORT_SMTP}' }), MESSAGE, context({ SUPPORT_SMTP: SMTP_TEST_PASSWORD, [SMTP_PASSWORD_SECRET]: 'not-this-one' }), registry());
    expect(starttls.logins.map((l) => l.accepted)).toEqual([true]);
  });

  it('missing, tells the model which secret to set, and connects nowhere', async () => {
    expect(await failure(mailer(), MESSAGE, context({}))).toBe('tool "email": SMTP is not configured: set the tenant secret SMTP_PASSWORD, or write {secret.NAME} in password');
    expect(await failure(mailer({ password: '{secret.MAILBOX}' }), MESSAGE, context({}))).toBe('tool "email": SMTP is not configured: the secret MAILBOX named by password is not set for this tenant');
    expect(starttls.connections).toBe(0);
  });

  it('rejected by the server, is a permanent failure the model reads, not retried and never repeated', async () => {
    const message = await failure(mailer(), MESSAGE, context({ [SMTP_PASSWORD_SECRET]: 'wrong-password-123' }));
    expect(message).toBe('tool "email": SMTP authentication failed (535 5.7.8 Authentication credentials invalid): check the sender address or smtp_username, and the password secret');
    expect(message).not.toContain('wrong-password-123');
    expect(starttls.connections).toBe(1);
    expect(starttls.logins).toEqual([{ method: 'PLAIN', username: SENDER, accepted: false, secure: true }]);
  });

  it('written into the DSL, is refused at load without repeating it', () => {
    const dsl = agentDsl([{ component_name: 'Email', name: 'Email', params: { ...entryParams({ smtp_port: 587 }), password: 'hunter2-LITERAL' } }]);
    const error = (() => {
      try {
        compileWorkflow(dsl, builtinComponents);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toEqual([
      expect.objectContaining({ field: 'obj.params.tools.0.params.password', message: expect.stringContaining('must not hold the credential itself') }),
    ]);
    expect(JSON.stringify((error as DslValidationError).problems)).not.toContain('hunter2-LITERAL');
  });
});

describe('Email params', () => {
  const builtin = emailTool();
  const problem = (params: Record<string, unknown>) => builtin.params.safeParse(params).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  const valid = { smtp_server: 'smtp.example.com', email: SENDER, sender_name: 'Bot' };

  it('default to port 465; take 587 as a number or a string', () => {
    expect(builtin.params.parse(valid)).toMatchObject({ smtp_port: 465, smtp_username: '', password: '' });
    expect(builtin.params.parse({ ...valid, smtp_port: '587' })).toMatchObject({ smtp_port: 587 });
  });

  it('refuse port 25 with the reason, and any port but 465 and 587', () => {
    expect(problem({ ...valid, smtp_port: 25 })).toEqual([
      'smtp_port: SMTP port 25 is not supported: AWS Lambda blocks outbound connections to port 25; use 465 (implicit TLS) or 587 (STARTTLS)',
    ]);
    expect(problem({ ...valid, smtp_port: 2525 })).toEqual(['smtp_port: SMTP port 2525 is not supported: use 465 (implicit TLS) or 587 (STARTTLS)']);
  });

  it('require what RAGFlow requires, in its words, and a host without scheme', () => {
    expect(problem({})).toEqual(['smtp_server: SMTP Server does not support empty value.', 'email: Email does not support empty value.', 'sender_name: Sender Name does not support empty value.']);
    expect(problem({ ...valid, smtp_server: ' ', email: '' })).toEqual(['smtp_server: SMTP Server does not support empty value.', 'email: Email does not support empty value.']);
    expect(problem({ ...valid, smtp_server: 'smtps://smtp.example.com:465' })).toEqual(['smtp_server: SMTP Server must be a host name or an IP address, without scheme or port (e.g. smtp.example.com)']);
    expect(problem({ ...valid, email: 'bot' })).toEqual(['email: Email must be the sender address, e.g. bot@example.com']);
    expect(builtin.params.safeParse({ ...valid, smtp_server: '[2001:db8::25]' }).success).toBe(true);
  });

  it('are the built-in Email’s, with its ports', () => {
    const shipped = builtinToolKinds.find((k) => k.name === 'Email');
    expect(shipped?.credentials).toEqual([{ param: 'password', secret: 'SMTP_PASSWORD' }]);
    expect(shipped?.params.safeParse({ ...valid, smtp_port: 25 }).success).toBe(false);
    expect(shipped?.params.safeParse({ ...valid, smtp_port: 587 }).success).toBe(true);
  });
});

describe('the SMTP host and the SSRF guard', () => {
  it('is refused when it is or resolves to an internal address the run does not allow, before connecting', async () => {
    const strict = new SsrfGuard({ resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    expect(await failure(mailer({ smtp_server: '10.0.0.25' }), MESSAGE, context(undefined, strict))).toBe('tool "email": SMTP server refused: 10.0.0.25 is a private address');
    expect(await failure(mailer({ smtp_server: '169.254.169.254' }), MESSAGE, context(undefined, strict))).toBe('tool "email": SMTP server refused: 169.254.169.254 is a link-local address');
    expect(await failure(mailer(), MESSAGE, context(undefined, strict))).toBe('tool "email": SMTP server refused: smtp.test resolves to a loopback address');
    expect(await failure(mailer(), MESSAGE, context(undefined, null))).toBe('tool "email": this run has no outbound guard, so it connects to no SMTP server');
    expect(starttls.connections).toBe(0);
  });
});

describe('SMTP replies', () => {
  it('a 4xx is retried on a new connection (backoff on the call’s timer), then the message goes through', async () => {
    starttls.enqueue({ kind: 'refuse', at: 'rcpt', code: 451, message: '4.3.0 Mailbox temporarily unavailable' });
    const { timer, waits } = skippingTimer();
    const outcome = await callTool(mailer(), MESSAGE, context(), createToolRegistry([], { timer }));
    expect(outcome).toMatchObject({ kind: 'result', outputs: { success: true } });
    expect(waits).toEqual([500]);
    expect(starttls.connections).toBe(2);
    expect(starttls.mails).toHaveLength(1);
  });

  it('4xx that go on past the retries fail the turn as transient', async () => {
    const busy = { kind: 'refuse', at: 'mail', code: 421, message: '4.7.0 Try again later' } as const;
    starttls.enqueue(busy, busy, busy);
    const { timer, waits } = skippingTimer();
    const error = await callTool(mailer(), MESSAGE, context(), createToolRegistry([], { timer })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolTransientError);
    expect((error as Error).message).toMatch(/^tool "email": the SMTP server answered 421 4\.7\.0 Try again later/);
    expect(waits).toEqual([500, 1_000]);
    expect(starttls.connections).toBe(3);
  });

  it('a 5xx is told to the model with the server’s reply, and not retried', async () => {
    starttls.enqueue({ kind: 'refuse', at: 'data', code: 554, message: '5.7.1 Message rejected as spam' });
    expect(await failure(mailer(), MESSAGE)).toBe('tool "email": the SMTP server refused the message: 554 5.7.1 Message rejected as spam');
    expect(starttls.connections).toBe(1);
    expect(starttls.mails).toHaveLength(0);
  });

  it('a server that never greets times out at the tool’s timeout, as transient (timer fired by the test)', async () => {
    starttls.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(mailer(), MESSAGE, context(), createToolRegistry([], { timer }));
    await expect.poll(() => starttls.connections).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([60_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
    // the call's end closed the connection: no socket is left waiting for a greeting
    await expect.poll(() => starttls.openConnections).toBe(0);
    expect(starttls.mails).toHaveLength(0);
  });
});

function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Assistant']],
    'Agent:Assistant': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You answer customers and send them e-mail when asked.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Assistant@content}'] }],
  });
}

describe('an Agent with an Email tool', () => {
  it('sends the message the model writes and tells the model it went out', async () => {
    const entry = { component_name: 'Email', name: 'Email', params: entryParams() };
    const tools = createToolRegistry([kind()], { timer: skippingTimer().timer });
    const resolve: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const services = { ...testServices({ openaiUrl: model.url, allow: ['smtp.test'], resolve, secrets: { SMTP_PASSWORD: SMTP_TEST_PASSWORD } }), tools };
    model.enqueue(
      { kind: 'tools', calls: [{ name: 'email_0', arguments: { to_email: 'alice@example.org', subject: 'Opening hours', content: '<p>We open at 9.</p>' } }] },
      { kind: 'text', text: 'I have e-mailed you our opening hours.' },
    );
    const before = model.requests.length;
    const events = await turn(canvasFor(agentDsl([entry]), { services }, withComponents(createAgent(tools))), { query: 'Mail me your opening hours: alice@example.org' });
    expect(messages(events)).toEqual(['I have e-mailed you our opening hours.']);
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent[0]?.tools?.[0]?.function).toMatchObject({ name: 'email_0', parameters: { required: ['to_email'] } });
    expect(sent[1]?.messages.at(-1)?.content).toBe('The email "Opening hours" was sent to alice@example.org.');
    expect(starttls.mails.map((m) => [m.recipients, m.headers.subject, m.body])).toEqual([[['alice@example.org'], 'Opening hours', '<p>We open at 9.</p>']]);
  });
});
