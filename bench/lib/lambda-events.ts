/**
 * What the Lambda runtime hands functions/http.ts: an API Gateway HTTP API event (payload
 * format 2.0) for one request, and the invocation's context.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';

const REGION = 'us-east-1';
const API_ID = 'a1b2c3d4e5';

export function httpApiEvent(method: string, path: string, options: { headers?: Record<string, string>; body?: string } = {}): APIGatewayProxyEventV2 {
  const domainName = `${API_ID}.execute-api.${REGION}.amazonaws.com`;
  const now = new Date();
  const requestId = `${randomBytes(6).toString('base64url')}=`;
  const http = { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'easel-bench/1.0' };
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: {
      accept: 'application/json',
      host: domainName,
      'user-agent': http.userAgent,
      'x-forwarded-for': http.sourceIp,
      'x-forwarded-port': '443',
      'x-forwarded-proto': 'https',
      ...(options.body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(options.body)) } : {}),
      ...options.headers,
    },
    requestContext: {
      accountId: '123456789012',
      apiId: API_ID,
      domainName,
      domainPrefix: API_ID,
      http,
      requestId,
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(options.body !== undefined ? { body: options.body } : {}),
    isBase64Encoded: false,
  };
}

/** The context of one invocation of `functionName`, `timeoutMs` from its deadline. */
export function invocationContext(functionName: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${REGION}:123456789012:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `2026/01/01/[$LATEST]${randomBytes(16).toString('hex')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
