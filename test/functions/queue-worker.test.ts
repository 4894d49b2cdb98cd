/**
 * functions/queue-worker.ts as Lambda invokes it: SQS events, a context whose remaining time
 * decides when a turn is suspended, and continuations sent with the real SQS client to a local
 * server speaking SQS's JSON protocol.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHead } from '../../lib/store/sessions';
import { claimNextTurn } from '../../lib/turns/execute';
import type { QueueMessage } from '../../lib/turns/queue';
import { graph, llmStep } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { sqsRecord } from '../helpers/sqs';
import { OpenAiServer } from '../llm/openai-server';
import { captureOutput, invocationContext } from './lambda-events';

type Handler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/** Just enough of SQS (JSON 1.0 protocol) for SendMessage: what the worker's client sends. */
class LocalSqs {
  readonly sent: { queueUrl: string; body: string }[] = [];
  private constructor(private readonly server: Server) {}

  static async start(): Promise<LocalSqs> {
    let instance: LocalSqs | undefined;
    const server = createServer(async (req, res) => {
      let raw = '';
      for await (const chunk of req) raw += String(chunk);
      if (req.headers['x-amz-target'] !== 'AmazonSQS.SendMessage') {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' }).end(JSON.stringify({ __type: 'com.amazonaws.sqs#InvalidAction', message: 'only SendMessage' }));
        return;
      }
      const input = JSON.parse(raw) as { QueueUrl: string; MessageBody: string };
      instance?.sent.push({ queueUrl: input.QueueUrl, body: input.MessageBody });
      const md5 = createHash('md5').update(input.MessageBody).digest('hex');
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' }).end(JSON.stringify({ MessageId: randomUUID(), MD5OfMessageBody: md5 }));
    });
    instance = new LocalSqs(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  get queueUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/123456789012/easel-turns`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const threeSteps = graph({
  begin: ['Begin', { mode: 'task' }, ['LLM:A']],
  'LLM:A': llmStep('A', ['LLM:B']),
  'LLM:B': llmStep('B', ['LLM:C']),
  'LLM:C': llmStep('C', []),
});

const MARGIN_MS = 5_000;
let handler: Handler;
let sqs: LocalSqs;
let model: OpenAiServer;
let engine: ReturnType<typeof testEngine>;

beforeAll(async () => {
  sqs = await LocalSqs.start();
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `answer ${body.messages.at(-1)?.content}` });
  engine = testEngine({ openaiUrl: model.url });
  for (const name of Object.keys(process.env)) if (name.startsWith('EASEL_LLM_') || name.startsWith('POWERTOOLS_')) delete process.env[name];
  Object.assign(process.env, {
    EASEL_TURN_QUEUE_URL: sqs.queueUrl,
    EASEL_WORKER_MARGIN_MS: String(MARGIN_MS),
    EASEL_LLM_BASE_URL: model.url,
    EASEL_LLM_API_KEY: 'sk-local-test',
    EASEL_LLM_DEFAULT_MODEL: 'openai:test-default',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDLOCALTEST',
    AWS_SECRET_ACCESS_KEY: 'local-test-secret',
  });
  ({ handler } = (await import('../../functions/queue-worker')) as unknown as { handler: Handler });
});
afterAll(async () => {
  await sqs.close();
  await model.close();
});

async function claimedMessage(): Promise<QueueMessage> {
  const tenant = newTenant();
  const workflowId = await newWorkflow(engine, tenant, threeSteps);
  const begun = await claimNextTurn(engine, { tenant, workflowId, runInput: { query: 'q' } }, { leaseMs: 60_000, async: true });
  if (!('claim' in begun)) throw new Error('not claimed');
  return { tenant, workflow_id: workflowId, run_id: begun.prepared.head.id, turn_number: 0, run_input: { query: 'q' }, claim: { token: begun.claim.token, turn: begun.claim.turn } };
}

/** A context with `remainingMs` left of the invocation. */
function contextWith(remainingMs: number): Context {
  return { ...invocationContext('easel-test-worker', remainingMs), getRemainingTimeInMillis: () => remainingMs };
}

describe('functions/queue-worker', () => {
  it('suspends a turn when the invocation is about to end and continues it from the message it queued', async () => {
    const message = await claimedMessage();
    const since = model.calls;
    const sentBefore = sqs.sent.length;
    let body = JSON.stringify(message);
    let invocations = 0;
    // every invocation has just under the margin left: it runs one batch and hands over
    for (; invocations < 10; invocations++) {
      const { result } = await captureOutput(() => handler({ Records: [sqsRecord(body)] }, contextWith(MARGIN_MS - 1)));
      expect(result.batchItemFailures).toEqual([]);
      const next = sqs.sent[sentBefore + invocations];
      if (!next) break;
      expect(next.queueUrl).toBe(sqs.queueUrl);
      body = next.body;
      expect(JSON.parse(body)).toMatchObject({ run_id: message.run_id, claim: message.claim });
    }
    // Begin, A, B, C: three hand-overs, the fourth invocation commits
    expect(invocations).toBe(3);
    expect(model.calls - since).toBe(3);
    const head = await getHead(engine.store, message.tenant, message.run_id as string);
    expect(head).toMatchObject({ turn: 1, status: 'completed', claim: null });
  });

  it('hands the message back when the invocation has less than EASEL_DEADLINE_MARGIN_MS left, having run nothing', async () => {
    const message = await claimedMessage();
    const since = model.calls;
    const record = sqsRecord(JSON.stringify(message));
    const { result } = await captureOutput(() => handler({ Records: [record] }, contextWith(1_000)));
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(model.calls).toBe(since);
    // the claim waits for the next delivery, with no worker's lease on it
    const head = await getHead(engine.store, message.tenant, message.run_id as string);
    expect(head).toMatchObject({ turn: 0, claim: { token: message.claim?.token } });
    expect(head.claim?.owner).toBeUndefined();
  });

  it('runs the whole turn in one invocation when there is time', async () => {
    const message = await claimedMessage();
    const sentBefore = sqs.sent.length;
    const { result } = await captureOutput(() => handler({ Records: [sqsRecord(JSON.stringify(message))] }, contextWith(600_000)));
    expect(result.batchItemFailures).toEqual([]);
    expect(sqs.sent.length).toBe(sentBefore);
    expect((await getHead(engine.store, message.tenant, message.run_id as string)).status).toBe('completed');
  });
});
