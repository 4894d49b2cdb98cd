/**
 * Invoke: an HTTP request to a tenant-supplied URL, through the SSRF guard. `variables` become
 * the query string (GET, DELETE, HEAD) or a JSON / form body (POST, PUT, PATCH); headers are a
 * JSON object whose values may reference variables and `{secret.NAME}` (the run's tenant's
 * secrets, resolved at request time, never stored). The response text is `result`, with every
 * resolved secret value redacted from it (an echoing server leaks nothing into the state).
 *
 * Timeouts, network failures and 429/5xx answers are retried `max_retries` times — only for
 * idempotent methods unless `retry_non_idempotent` is set — and then fail the turn as
 * transient (nothing is committed). A refused URL is a workflow error.
 */
import { z } from 'zod';
import { type ComponentContext, defineComponent } from '../canvas/component';
import { ComponentError, TransientError } from '../canvas/errors';
import { isRecord, valueToText } from '../canvas/references';
import { OutboundError, outboundRequest } from '../outbound/request';
import { redactSecrets } from '../secrets/redact';
import { checkVariable } from './checks';
import { guardOf, secretOf } from './services';

export const MAX_INVOKE_TIMEOUT_S = 300;
const IDEMPOTENT = new Set(['get', 'head', 'put', 'delete', 'options']);
const WITH_BODY = new Set(['post', 'put', 'patch']);

const params = z.lazy(() => z.looseObject({
  url: z.string().min(1, 'needs a URL'),
  method: z
    .string()
    .nullish()
    .transform((m) => (m ?? 'get').toLowerCase())
    .pipe(z.enum(['get', 'post', 'put', 'patch', 'delete', 'head'], { error: 'must be GET, POST, PUT, PATCH, DELETE or HEAD' })),
  headers: z
    .union([z.string(), z.record(z.string(), z.unknown())])
    .nullish()
    .transform((h, issue) => {
      if (h === null || h === undefined || h === '') return {};
      if (typeof h !== 'string') return h;
      try {
        const parsed: unknown = JSON.parse(h);
        if (isRecord(parsed)) return parsed;
      } catch {
        // reported below
      }
      issue.addIssue({ code: 'custom', message: 'must be a JSON object of header names to values' });
      return z.NEVER;
    }),
  variables: z
    .array(z.looseObject({ key: z.string().min(1), ref: z.string().nullish(), value: z.unknown().optional() }))
    .nullish()
    .transform((v) => v ?? []),
  timeout: z.number().positive().max(MAX_INVOKE_TIMEOUT_S).nullish().transform((t) => t ?? 60),
  proxy: z
    .string()
    .nullish()
    .refine((p) => !p || p.replace(/^https?:\/\//, '') === '', 'proxies are not supported'),
  clean_html: z.boolean().nullish(),
  datatype: z.enum(['json', 'formdata']).nullish().transform((d) => d ?? 'json'),
  max_retries: z.number().int().min(0).max(5).nullish().transform((r) => r ?? 0),
  delay_after_error: z.number().min(0).max(30).nullish().transform((d) => d ?? 2),
  retry_non_idempotent: z.boolean().nullish(),
}));
type InvokeParams = z.output<typeof params>;

export const invoke = defineComponent({
  name: 'Invoke',
  external: true,
  params,
  defaultOutput: 'result',
  check(p, scope) {
    return p.variables.flatMap((v, i) => (v.ref ? checkVariable(v.ref, scope, `obj.params.variables.${i}.ref`) : []));
  },
  async invoke(p, ctx) {
    const guard = guardOf(ctx);
    let url = (await ctx.render(p.url)).trim();
    if (!/^https?:\/\//i.test(url)) url = `http://${url}`;
    const args = await argumentsOf(p, ctx);
    const { headers, secrets } = await headersOf(p, ctx);
    let body: string | undefined;
    if (WITH_BODY.has(p.method)) {
      if (p.datatype === 'json') {
        body = JSON.stringify(args);
        headers['content-type'] ??= 'application/json';
      } else {
        body = new URLSearchParams(Object.entries(args).map(([k, v]): [string, string] => [k, valueToText(v)])).toString();
        headers['content-type'] ??= 'application/x-www-form-urlencoded';
      }
    } else if (Object.keys(args).length > 0) {
      const target = safeUrl(url);
      for (const [k, v] of Object.entries(args)) target.searchParams.append(k, valueToText(v));
      url = target.toString();
    }

    // recorded as built, with the headers as the DSL writes them: `{secret.NAME}`, not its value
    const request = { method: p.method.toUpperCase(), url, headers: p.headers ?? null, ...(body === undefined ? {} : { body }) };
    // a request the turn has a record of is answered from it; a recorded failure is tried again
    const recorded = ctx.recordedCall({ kind: 'invoke', name: hostOf(url), request });
    const answer = recorded?.record.status === 'ok' ? recordedOutputs(recorded.record.result) : undefined;
    if (answer) {
      ctx.recordCall({ kind: 'invoke', name: hostOf(url), request, result: answer, replayed: true });
      return { outputs: answer };
    }
    try {
      const outputs = await send(p, ctx, { url, headers, body, guard, secrets });
      ctx.recordCall({ kind: 'invoke', name: hostOf(url), request, result: outputs });
      return { outputs };
    } catch (error) {
      ctx.recordCall({ kind: 'invoke', name: hostOf(url), request, error: error instanceof Error ? error.message : String(error) });
      throw error;
    }
  },
});

/** Sends the request, retrying as the params allow; what it answered, secrets redacted. */
async function send(
  p: InvokeParams,
  ctx: ComponentContext,
  r: { url: string; headers: Record<string, string>; body: string | undefined; guard: ReturnType<typeof guardOf>; secrets: string[] },
): Promise<{ result: string; status: number }> {
  const { url, headers, body, guard, secrets } = r;
  const retries = IDEMPOTENT.has(p.method) || p.retry_non_idempotent ? p.max_retries : 0;
  for (let attempt = 0; ; attempt++) {
    let failure: string;
    try {
      const response = await outboundRequest({
        url,
        method: p.method.toUpperCase(),
        headers,
        ...(body === undefined ? {} : { body }),
        timeoutMs: p.timeout * 1000,
        guard,
        signal: ctx.signal,
      });
      if (response.status !== 429 && response.status < 500) {
        const result = p.clean_html ? htmlToText(response.body) : response.body;
        return { result: redactSecrets(result, secrets), status: response.status };
      }
      failure = `the server answered ${response.status}`;
    } catch (error) {
      if (!(error instanceof OutboundError) || !error.transient) {
        throw error instanceof ComponentError || error instanceof TransientError
          ? error
          : new ComponentError(redactSecrets(messageOf(error), secrets));
      }
      failure = redactSecrets(error.message, secrets);
      if (error.reason === 'aborted' || ctx.signal.aborted) throw new TransientError(`Invoke ${hostOf(url)}: ${failure}`);
    }
    if (attempt >= retries) throw new TransientError(`Invoke ${hostOf(url)}: ${failure}`);
    await new Promise((resolve) => setTimeout(resolve, p.delay_after_error * 1000 * 2 ** attempt));
  }
}

/** Invoke's outputs as its record keeps them: `{result, status}`. */
function recordedOutputs(result: unknown): { result: string; status: number } | undefined {
  return isRecord(result) && typeof result.result === 'string' && typeof result.status === 'number' ? { result: result.result, status: result.status } : undefined;
}

async function argumentsOf(p: InvokeParams, ctx: ComponentContext): Promise<Record<string, unknown>> {
  const args: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const v of p.variables) {
    let value: unknown = '';
    if (v.ref) value = await ctx.get(v.ref);
    else if (v.value !== undefined && v.value !== null) value = typeof v.value === 'string' ? await ctx.render(v.value) : v.value;
    if (p.datatype === 'json' && typeof value === 'string') {
      const t = value.trim();
      if (t.startsWith('{') || t.startsWith('[')) {
        try {
          value = JSON.parse(t);
        } catch {
          // a string that only looks like JSON stays a string
        }
      }
    }
    args[v.key] = value ?? '';
  }
  return args;
}

/**
 * Header values render references; `{secret.NAME}` is filled in here and nowhere else, from
 * the header as written in the DSL (text a reference renders — a user's query — never resolves
 * a secret). Also returns the values filled in, to redact them from what comes back.
 */
async function headersOf(p: InvokeParams, ctx: ComponentContext): Promise<{ headers: Record<string, string>; secrets: string[] }> {
  const headers: Record<string, string> = {};
  const secrets = new Set<string>();
  for (const [name, raw] of Object.entries(p.headers)) {
    // split keeps the captured names at odd positions: text, name, text, name, text
    const parts = valueToText(raw).split(/\{secret\.([A-Za-z0-9_]+)\}/);
    let value = '';
    for (const [i, part] of parts.entries()) {
      if (i % 2 === 0) {
        value += part === '' ? '' : await ctx.render(part);
        continue;
      }
      const secret = await secretOf(ctx, part);
      if (secret === undefined) throw new ComponentError(`header ${name} uses an unknown secret "${part}"`);
      secrets.add(secret);
      value += secret;
    }
    headers[name.toLowerCase()] = value;
  }
  return { headers, secrets: [...secrets] };
}

function safeUrl(url: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new ComponentError('the URL is not valid');
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'the server';
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : 'the request failed';
}

/** Enough HTML-to-text for `clean_html`: scripts and styles dropped, tags removed, entities decoded. */
export function htmlToText(html: string): string {
  return html
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, '')
    .replace(/<br\s*\/?>|<\/(p|div|li|h[1-6]|tr)>/gi, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n+/g, '\n')
    .trim();
}
