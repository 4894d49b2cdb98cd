/** SQS records as Lambda hands them to the queue worker. */
import type { SQSRecord } from 'aws-lambda';

export function sqsRecord(body: string, id = `m-${Math.random().toString(16).slice(2)}`, receiveCount = 1): SQSRecord {
  return {
    messageId: id,
    receiptHandle: `AQEB${id}-${receiveCount}`,
    body,
    attributes: { ApproximateReceiveCount: String(receiveCount), SentTimestamp: String(Date.now()), SenderId: 'AIDAEXAMPLE', ApproximateFirstReceiveTimestamp: String(Date.now()) },
    messageAttributes: {},
    md5OfBody: '0'.repeat(32),
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:easel-turns',
    awsRegion: 'us-east-1',
  };
}
