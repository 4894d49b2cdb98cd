/**
 * A real SMTP server on 127.0.0.1 and an ephemeral port (nodemailer's `smtp-server`), for the
 * Email tool: implicit TLS (`secure`, as on 465) or STARTTLS (as on 587), with the certificate
 * given; AUTH PLAIN/LOGIN only over TLS, accepting one user and password (else 535); every
 * accepted message recorded with its envelope, its headers (encoded words decoded) and its body.
 *
 * Scriptable per connection (a queue, one entry per connection): a stall that never greets, or
 * a reply that refuses the message at MAIL FROM, RCPT TO or after DATA (421, 451, 550, 554...).
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';

export type SmtpScripted = { kind: 'stall' } | { kind: 'refuse'; at: 'mail' | 'rcpt' | 'data'; code: number; message: string };

export interface ReceivedMail {
  from: string;
  recipients: string[];
  /** Lower-case names, unfolded, encoded words decoded. */
  headers: Record<string, string>;
  /** The body, its transfer encoding undone. */
  body: string;
  raw: string;
  /** Whether the session was encrypted, and as which user it logged in. */
  secure: boolean;
  user: string | undefined;
}

export interface SmtpLogin {
  method: string;
  username: string;
  accepted: boolean;
  secure: boolean;
}

export class SmtpTestServer {
  readonly mails: ReceivedMail[] = [];
  readonly logins: SmtpLogin[] = [];
  /** One entry per connection accepted, whether it got anywhere or not. */
  connections = 0;
  readonly #queue: SmtpScripted[] = [];
  readonly #scriptFor = new Map<string, SmtpScripted>();

  private constructor(
    private readonly server: SMTPServer,
    readonly port: number,
  ) {}

  /** `offerStarttls: false` makes a server that would take a login in plain text. @default true */
  static async start(options: { secure: boolean; key: string; cert: string; user: string; password: string; offerStarttls?: boolean }): Promise<SmtpTestServer> {
    let self!: SmtpTestServer;
    const scripted = (session: SMTPServerSession, at: 'mail' | 'rcpt' | 'data') => {
      const script = self.#scriptFor.get(session.id);
      if (script?.kind !== 'refuse' || script.at !== at) return null;
      return Object.assign(new Error(script.message), { responseCode: script.code });
    };
    const server = new SMTPServer({
      secure: options.secure,
      key: options.key,
      cert: options.cert,
      name: 'smtp.test',
      logger: false,
      authMethods: ['PLAIN', 'LOGIN'],
      ...(options.offerStarttls === false ? { disabledCommands: ['STARTTLS'], allowInsecureAuth: true } : {}),
      // a test's teardown, not a timing the tests depend on
      closeTimeout: 50,
      onConnect(session, callback) {
        self.connections++;
        const script = self.#queue.shift();
        if (script) self.#scriptFor.set(session.id, script);
        if (script?.kind === 'stall') return; // no greeting, ever
        callback();
      },
      onAuth(auth, session, callback) {
        const accepted = auth.username === options.user && auth.password === options.password;
        self.logins.push({ method: auth.method, username: auth.username ?? '', accepted, secure: session.secure });
        if (!accepted) return callback(Object.assign(new Error('5.7.8 Authentication credentials invalid'), { responseCode: 535 }));
        callback(null, { user: auth.username });
      },
      onMailFrom(_address, session, callback) {
        callback(scripted(session, 'mail'));
      },
      onRcptTo(_address, session, callback) {
        callback(scripted(session, 'rcpt'));
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          const refusal = scripted(session, 'data');
          if (refusal) return callback(refusal);
          const raw = Buffer.concat(chunks).toString('utf8');
          self.mails.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            recipients: session.envelope.rcptTo.map((r) => r.address),
            ...parseMessage(raw),
            raw,
            secure: session.secure,
            user: typeof session.user === 'string' ? session.user : undefined,
          });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new SmtpTestServer(server, (server.server.address() as AddressInfo).port);
    return self;
  }

  /** Connections the server still holds open. */
  get openConnections(): number {
    return this.server.connections.size;
  }

  /** The next connections get these, in order, before being served normally again. */
  enqueue(...scripts: SmtpScripted[]): void {
    this.#queue.push(...scripts);
  }

  reset(): void {
    this.mails.length = 0;
    this.logins.length = 0;
    this.connections = 0;
    this.#queue.length = 0;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function parseMessage(raw: string): { headers: Record<string, string>; body: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = split < 0 ? raw : raw.slice(0, split);
  const rest = split < 0 ? '' : raw.slice(split + 4);
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = decodeWords(line.slice(colon + 1).trim());
  }
  const encoding = headers['content-transfer-encoding']?.toLowerCase();
  const body =
    encoding === 'quoted-printable'
      ? Buffer.from(rest.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8')
      : encoding === 'base64'
        ? Buffer.from(rest, 'base64').toString('utf8')
        : rest;
  return { headers, body: body.replace(/\r\n$/, '') };
}

/** RFC 2047 encoded words (`=?UTF-8?B?...?=`, `=?UTF-8?Q?...?=`), as mail clients show them. */
function decodeWords(value: string): string {
  return value.replace(/=\?([^?]+)\?([BQ])\?([^?]*)\?=(\s+(?==\?))?/gi, (_, _charset: string, kind: string, text: string) =>
    kind.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64').toString('utf8')
      : Buffer.from(text.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (__, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8'),
  );
}
