/**
 * A queue inside the process, for `npm start` and tests: messages are delivered as real SQS
 * event records to the same batch handler the Lambda worker runs; messages it asks to retry come
 * back after `retryDelayMs`, up to `maxReceives`, then land in `deadLetters`.
 */
import { randomUUID } from 'node:crypto';
import type { QueueMessage } from '../turns/queue';

export interface SqsRecordLike {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: { ApproximateReceiveCount: string; SentTimestamp: string };
  messageAttributes: Record<string, never>;
  md5OfBody: string;
  eventSource: 'aws:sqs';
  eventSourceARN: string;
  awsRegion: string;
}

export type BatchHandler = (records: SqsRecordLike[]) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;

export function createInProcessQueue(handler: BatchHandler, options: { retryDelayMs?: number; maxReceives?: number } = {}) {
  const deadLetters: string[] = [];
  const pending = new Set<Promise<void>>();
  const deliver = (body: string, messageId: string, receives: number) => {
    const run = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      const record: SqsRecordLike = {
        messageId,
        receiptHandle: randomUUID(),
        body,
        attributes: { ApproximateReceiveCount: String(receives), SentTimestamp: String(Date.now()) },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:local:000000000000:easel-turns',
        awsRegion: 'local',
      };
      const { batchItemFailures } = await handler([record]).catch(() => ({ batchItemFailures: [{ itemIdentifier: messageId }] }));
      if (batchItemFailures.some((f) => f.itemIdentifier === messageId)) {
        if (receives >= (options.maxReceives ?? 5)) deadLetters.push(body);
        else setTimeout(() => deliver(body, messageId, receives + 1), options.retryDelayMs ?? 1000);
      }
    })();
    pending.add(run);
    void run.finally(() => pending.delete(run));
  };
  return {
    deadLetters,
    async enqueue(message: QueueMessage): Promise<void> {
      deliver(JSON.stringify(message), randomUUID(), 1);
    },
    /** Sends a raw body, as another producer might (tests of poison messages). */
    sendRaw(body: string): void {
      deliver(body, randomUUID(), 1);
    },
    /** Resolves once nothing is being delivered. */
    async idle(): Promise<void> {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
  };
}
