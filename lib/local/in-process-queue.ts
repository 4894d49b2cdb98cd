/**
 * A queue inside the process, for `npm start` and tests: messages are delivered as real SQS
 * event records to the same batch handler the Lambda worker runs; messages it asks to retry come
 * back after `retryDelayMs`, up to `maxReceives`, then land in `deadLetters`. The queue dies with
 * its process: once `close`d (the server is stopping) it refuses new messages (`unavailable`),
 * delivers nothing more, and hands every message it still holds to the caller's `drop` instead.
 */
import { randomUUID } from 'node:crypto';
import { EaselError } from '../errors';
import type { WorkerMessage } from '../turns/queue';

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
  const waiting = new Map<NodeJS.Timeout, string>();
  // set once the queue is closed (read through a function: it changes under the deliveries' awaits)
  let drop: ((body: string) => Promise<void>) | undefined;
  const dropping = () => drop;
  const track = (work: Promise<void>) => {
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };
  const refuseWhenClosed = () => {
    if (dropping()) throw new EaselError('unavailable', 'the server is stopping: the turn queue takes no more messages');
  };
  const deliver = (body: string, messageId: string, receives: number) => {
    const run = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      const dropBefore = dropping();
      if (dropBefore) return dropBefore(body);
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
        else if (dropping()) await dropping()?.(body);
        else {
          const timer = setTimeout(() => {
            waiting.delete(timer);
            deliver(body, messageId, receives + 1);
          }, options.retryDelayMs ?? 1000);
          waiting.set(timer, body);
        }
      }
    })();
    track(run.catch(() => undefined));
  };
  return {
    deadLetters,
    async enqueue(message: WorkerMessage): Promise<void> {
      refuseWhenClosed();
      deliver(JSON.stringify(message), randomUUID(), 1);
    },
    /** Sends a raw body, as another producer might (tests of poison messages). */
    sendRaw(body: string): void {
      refuseWhenClosed();
      deliver(body, randomUUID(), 1);
    },
    /** Resolves once nothing is being delivered (or dropped). */
    async idle(): Promise<void> {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
    /**
     * Takes and delivers nothing more: messages waiting for a retry, or handed back by a delivery
     * still running, go to `dropped`; new ones are refused.
     */
    close(dropped: (body: string) => Promise<void>): void {
      if (drop) return;
      drop = dropped;
      for (const [timer, body] of waiting) {
        clearTimeout(timer);
        track(dropped(body).catch(() => undefined));
      }
      waiting.clear();
    },
  };
}
