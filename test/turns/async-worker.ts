/**
 * A queue worker in a process of its own, for the crash tests: it hands one SQS record to the
 * real batch handler and prints what happens. `pauseAfterCheckpoint: n` makes it print
 * `checkpoint n` once that checkpoint is written and then hang there (the test kills it).
 * Nothing is shared with other workers but the table. Its clock is the test's (`now`, epoch
 * ms, standing still): whether the lease of a worker the test killed has run out is decided by
 * the clock the test gives the next worker, never by how long the machine took. Model calls time
 * out after a minute: on a loaded machine a slow answer must not be taken for a lost one.
 * The test bundles it with esbuild (test/reliability/async-crash.test.ts), so it starts fast.
 */
import { builtinComponents } from '../../lib/components';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { createDynamoClients } from '../../lib/store/setup';
import { processBatch } from '../../lib/turns/queue';
import { testServices } from '../helpers/services';
import { sqsRecord } from '../helpers/sqs';

const args = JSON.parse(process.argv[2] ?? '{}') as {
  endpoint: string;
  table: string;
  openaiUrl: string;
  body: string;
  messageId: string;
  receiveCount: number;
  leaseMs: number;
  now: number;
  pauseAfterCheckpoint?: number;
};

async function main(): Promise<void> {
  const { doc } = createDynamoClients({ endpoint: args.endpoint });
  const clock = () => args.now;
  const engine = {
    store: { doc, table: args.table, now: clock },
    clock,
    registry: builtinComponents,
    services: testServices({ openaiUrl: args.openaiUrl, timeoutMs: 60_000 }),
    leaseMs: args.leaseMs,
  };
  const record = sqsRecord(args.body, args.messageId, args.receiveCount);
  const result = await processBatch(
    { engine, guard: new SsrfGuard({ allow: ['127.0.0.1'] }), log: (message, fields) => process.stdout.write(`log ${JSON.stringify({ message, ...fields })}\n`) },
    [record],
    {
      hooks: {
        async afterCheckpoint(seq) {
          process.stdout.write(`checkpoint ${seq}\n`);
          if (seq === args.pauseAfterCheckpoint) await new Promise(() => undefined);
        },
      },
    },
  );
  process.stdout.write(`result ${JSON.stringify(result)}\n`);
  process.exit(0);
}

void main();
