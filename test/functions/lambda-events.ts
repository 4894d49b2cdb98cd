/**
 * Real Lambda payloads for the entry points in functions/: API Gateway HTTP API (payload 2.0)
 * and Function URL events as AWS sends them, a Lambda context, and a capture of what the
 * Powertools Logger and Metrics print (JSON lines on stdout/stderr) so tests stay quiet.
 */
import { randomBytes } from 'node:crypto';
import type { APIGatewayProxyEventV2, Context, LambdaFunctionURLEvent } from 'aws-lambda';
import { invocationContext as benchContext } from '../../bench/lib/lambda-events';

export interface RequestOptions {
  key?: string;
  body?: unknown;
  query?: string;
  headers?: Record<string, string>;
}

const REGION = 'us-east-1';

function shared(method: string, path: string, domainName: string, options: RequestOptions) {
  const requestId = `${randomBytes(6).toString('base64url')}=`;
  const now = new Date();
  const headers: Record<string, string> = {
    accept: '*/*',
    'content-length': '0',
    host: domainName,
    'user-agent': 'easel-tests/1.0',
    'x-amzn-trace-id': `Root=1-${Math.floor(now.getTime() / 1000).toString(16)}-${randomBytes(12).toString('hex')}`,
    'x-forwarded-for': '203.0.113.7',
    'x-forwarded-port': '443',
    'x-forwarded-proto': 'https',
    ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
  };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  Object.assign(headers, options.headers);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: options.query ?? '',
    headers,
    ...(options.query ? { queryStringParameters: Object.fromEntries(new URLSearchParams(options.query)) } : {}),
    requestId,
    http: { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'easel-tests/1.0' },
    time: now.toUTCString(),
    timeEpoch: now.getTime(),
    ...(body !== undefined ? { body } : {}),
    isBase64Encoded: false,
  };
}

/** What API Gateway's HTTP API sends a Lambda proxy integration (payload format 2.0). */
export function httpApiEvent(method: string, path: string, options: RequestOptions = {}): APIGatewayProxyEventV2 {
  const apiId = 'a1b2c3d4e5';
  const domainName = `${apiId}.execute-api.${REGION}.amazonaws.com`;
  const { requestId, http, time, timeEpoch, ...event } = shared(method, path, domainName, options);
  return {
    ...event,
    requestContext: { accountId: '123456789012', apiId, domainName, domainPrefix: apiId, http, requestId, routeKey: '$default', stage: '$default', time, timeEpoch },
  };
}

/** What a Lambda Function URL (auth type NONE) sends its function. */
export function functionUrlEvent(method: string, path: string, options: RequestOptions = {}): LambdaFunctionURLEvent {
  const urlId = 'abcdefghijklmnopqrstuvwxyz012345';
  const domainName = `${urlId}.lambda-url.${REGION}.on.aws`;
  const { requestId, http, time, timeEpoch, ...event } = shared(method, path, domainName, options);
  return {
    ...event,
    requestContext: { accountId: 'anonymous', apiId: urlId, domainName, domainPrefix: urlId, http, requestId, routeKey: '$default', stage: '$default', time, timeEpoch },
  };
}

/** The context the Node.js runtime passes each invocation (the benchmark's, which drives the same handler). */
export function invocationContext(functionName: string, timeoutMs = 29_000): Context {
  return benchContext(functionName, timeoutMs);
}

/** Every JSON line written to stdout/stderr while `run` runs (and nothing reaches the terminal). */
export async function captureOutput<T>(run: () => Promise<T>): Promise<{ result: T; lines: Record<string, unknown>[]; raw: string }> {
  const { stdout, stderr } = process;
  const originals = { out: stdout.write, err: stderr.write };
  let raw = '';
  const capture = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    raw += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    cb?.();
    return true;
  }) as typeof stdout.write;
  stdout.write = capture;
  stderr.write = capture;
  try {
    const result = await run();
    const lines = raw
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { result, lines, raw };
  } finally {
    stdout.write = originals.out;
    stderr.write = originals.err;
  }
}

/** The metrics of the EMF documents among `lines`, summed by name. */
export function emfMetrics(lines: readonly Record<string, unknown>[]): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const line of lines) {
    const aws = line._aws as { CloudWatchMetrics: { Namespace: string; Metrics: { Name: string }[] }[] } | undefined;
    for (const directive of aws?.CloudWatchMetrics ?? []) {
      for (const { Name } of directive.Metrics) {
        const value = line[Name];
        (out[Name] ??= []).push(...(Array.isArray(value) ? (value as number[]) : [value as number]));
      }
    }
  }
  return out;
}

export { sseFrames } from '../helpers/http';
