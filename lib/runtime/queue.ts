/**
 * Sending turns to the SQS queue (EASEL_TURN_QUEUE_URL). The SQS client is loaded and created
 * on the first message, so an entry point that never queues a turn never evaluates it.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { WorkerMessage } from '../turns/queue';

/** Sends a message to the worker's queue: a turn, or a page of a replay. */
export type Enqueue = (message: WorkerMessage) => Promise<void>;

export function sqsEnqueue(queueUrl: string): Enqueue {
  let sqs: SQSClient | undefined;
  return async (message) => {
    const { SQSClient, SendMessageCommand } = await import('@aws-sdk/client-sqs');
    // the queue URL's host is the queue's endpoint (an SQS-compatible server too)
    sqs ??= new SQSClient({ endpoint: new URL(queueUrl).origin });
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(message) }));
  };
}
