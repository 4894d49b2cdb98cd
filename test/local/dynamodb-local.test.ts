import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteTableCommand, DescribeTableCommand, DescribeTimeToLiveCommand, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { JAVA_REQUIRED_MESSAGE, javaMajorVersion, startDynamoDbLocal, startWatchdog } from '../../lib/local/dynamodb-local';
import { createDynamoClients, createTableInput, ensureTable } from '../../lib/store/setup';
import { LISTING_INDEX, TIMER_INDEX, TTL_ATTRIBUTE } from '../../lib/store/table';
import { testTable } from '../helpers/dynamo';

const temps: string[] = [];
async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(temps.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** An executable shell script standing in for `java`: reports `version`, then runs `body`. */
async function fakeJava(version: string, body: string): Promise<string> {
  const file = join(await tempDir('easel-fake-java-'), 'java');
  await writeFile(file, `#!/bin/sh\nif [ "$1" = -version ]; then echo '${version}' >&2; exit 0; fi\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

/** Resolves true when something already listens on 127.0.0.1:port. */
function portInUse(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(true));
    server.listen(port, '127.0.0.1', () => server.close(() => done(false)));
  });
}

describe('test DynamoDB (global setup)', () => {
  it('hands the endpoint and table to test files through inject and the environment', () => {
    const provided = inject('easelDynamoDb');
    expect(provided.endpoint).toMatch(/^https?:\/\//);
    expect(process.env.EASEL_DYNAMODB_ENDPOINT).toBe(provided.endpoint);
    expect(process.env.EASEL_DYNAMODB_TABLE).toBe(provided.tableName);
    expect(testTable()).toMatchObject({ endpoint: provided.endpoint, tableName: provided.tableName });
  });

  it('answers, and ensureTable is idempotent on the existing table', async () => {
    const { client, tableName } = testTable();
    await ensureTable(client, tableName);
    await expect(ensureTable(client, tableName)).resolves.toBeUndefined();
    const { TableNames } = await client.send(new ListTablesCommand({}));
    expect(TableNames).toContain(tableName);
  });

  it('ensureTable tolerates concurrent creators of a new table', async () => {
    const { client } = testTable();
    const name = `easel-concurrent-${Date.now()}`;
    try {
      await Promise.all([ensureTable(client, name), ensureTable(client, name), ensureTable(client, name)]);
      const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
      expect(TimeToLiveDescription?.TimeToLiveStatus).toBe('ENABLED');
    } finally {
      await client.send(new DeleteTableCommand({ TableName: name }));
    }
  });

  it('has the listing index, a KEYS_ONLY stream and TTL enabled', async () => {
    const { client, tableName } = testTable();
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    expect(Table?.TableStatus).toBe('ACTIVE');
    expect(Table?.KeySchema).toEqual([
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    const gsi = Table?.GlobalSecondaryIndexes?.find((index) => index.IndexName === LISTING_INDEX);
    expect(gsi?.IndexStatus).toBe('ACTIVE');
    expect(gsi?.Projection?.ProjectionType).toBe('INCLUDE');
    expect(gsi?.Projection?.NonKeyAttributes).toContain(TTL_ATTRIBUTE);
    expect(Table?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'KEYS_ONLY' });
    expect(Table?.BillingModeSummary?.BillingMode ?? 'PAY_PER_REQUEST').toBe('PAY_PER_REQUEST');
    const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    expect(TimeToLiveDescription).toEqual({ TimeToLiveStatus: 'ENABLED', AttributeName: TTL_ATTRIBUTE });
  });

  it('shares one database across credentials (-sharedDb)', async () => {
    const { doc, endpoint, tableName } = testTable();
    const key = { pk: `T#shared-${Date.now()}`, sk: 'probe' };
    await doc.send(new PutCommand({ TableName: tableName, Item: { ...key, gone: undefined, n: 1 } }));
    const other = createDynamoClients({ endpoint, region: 'eu-west-1', credentials: { accessKeyId: 'other', secretAccessKey: 'other' } });
    try {
      const { Item } = await other.doc.send(new GetCommand({ TableName: tableName, Key: key }));
      expect(Item).toEqual({ ...key, n: 1 });
    } finally {
      other.client.destroy();
    }
  });
});

describe('createTableInput', () => {
  it('translates the CloudFormation definition into CreateTable parameters', () => {
    const input = createTableInput('t');
    expect(input.TableName).toBe('t');
    expect(input.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'KEYS_ONLY' });
    expect(input).not.toHaveProperty('TimeToLiveSpecification');
    expect(input.BillingMode).toBe('PAY_PER_REQUEST');
    expect(input.GlobalSecondaryIndexes?.map((index) => index.IndexName)).toEqual([LISTING_INDEX, TIMER_INDEX]);
  });
});

/** A JVM starting on a loaded two-core machine (the test global setup allows as long). */
const STARTUP_LIMIT_MS = 120_000;

describe('startDynamoDbLocal', () => {
  it('keeps items in a persistent dataDir across stop and start', async () => {
    const dataDir = join(await tempDir('easel-ddb-'), 'nested', 'db'); // created if missing
    const item = { pk: 'T#persist', sk: 'item', value: 'kept' };

    const first = await startDynamoDbLocal({ dataDir, readyTimeoutMs: STARTUP_LIMIT_MS });
    const a = createDynamoClients({ endpoint: first.endpoint });
    try {
      await ensureTable(a.client, 'persist');
      await a.doc.send(new PutCommand({ TableName: 'persist', Item: item }));
    } finally {
      a.client.destroy();
      await first.stop();
    }

    const second = await startDynamoDbLocal({ dataDir, readyTimeoutMs: STARTUP_LIMIT_MS });
    const b = createDynamoClients({ endpoint: second.endpoint });
    try {
      await ensureTable(b.client, 'persist'); // exists already: no error, no reset
      const { Item } = await b.doc.send(new GetCommand({ TableName: 'persist', Key: { pk: item.pk, sk: item.sk } }));
      expect(Item).toEqual(item);
    } finally {
      b.client.destroy();
      await second.stop();
    }
  }, 2 * STARTUP_LIMIT_MS + 30_000);

  it('listens on the given port; stop() is idempotent and frees the port', async () => {
    const probe = createServer();
    const port = await new Promise<number>((done) =>
      probe.listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => done(typeof address === 'object' && address ? address.port : 0));
      }),
    );
    const lines: string[] = [];
    const local = await startDynamoDbLocal({ port, inMemory: true, log: (line) => lines.push(line), readyTimeoutMs: STARTUP_LIMIT_MS });
    expect(local.port).toBe(port);
    expect(local.endpoint).toBe(`http://127.0.0.1:${port}`);
    expect(lines.some((line) => line.includes(String(port)))).toBe(true);
    expect(await portInUse(port)).toBe(true);

    await Promise.all([local.stop(), local.stop()]);
    await expect(local.stop()).resolves.toBeUndefined();
    expect(await portInUse(port)).toBe(false);
    const { client } = createDynamoClients({ endpoint: local.endpoint });
    try {
      await expect(client.send(new ListTablesCommand({}))).rejects.toThrow();
    } finally {
      client.destroy();
    }
  }, 2 * STARTUP_LIMIT_MS + 30_000);

  it('refuses a port that is already taken, before starting Java', async () => {
    const holder = createServer();
    await new Promise<void>((done) => holder.listen(0, '0.0.0.0', done));
    const port = (holder.address() as { port: number }).port;
    try {
      await expect(startDynamoDbLocal({ port })).rejects.toThrow(`cannot listen on port ${port}: it is already in use`);
    } finally {
      holder.close();
    }
  });

  it('fails with the tail of stderr when the process exits during startup', async () => {
    const java = await fakeJava('openjdk version "17.0.1"', 'echo "Error: something broke" >&2; exit 3');
    await expect(startDynamoDbLocal({ javaCommand: java })).rejects.toThrow(/exited during startup \(3\):\nError: something broke/);
  });

  it('fails after the deadline when nothing answers, and stops the process', async () => {
    // it notes the SIGTERM it gets (a SIGKILL, which cannot be trapped, would leave no note)
    const marker = join(await tempDir('easel-fake-java-stop-'), 'stopped-by');
    const java = await fakeJava('openjdk version "17.0.1"', `echo "still starting" >&2; trap 'echo TERM > "${marker}"; kill $! 2>/dev/null; exit 0' TERM; sleep 30 & wait`);
    await expect(startDynamoDbLocal({ javaCommand: java, readyTimeoutMs: 300 })).rejects.toThrow(/did not answer within 300 ms:\nstill starting/);
    expect((await readFile(marker, 'utf8')).trim()).toBe('TERM'); // stopped with SIGTERM, not the SIGKILL that follows it
  });

  it('kills the JVM through its watchdog when this process goes away', async () => {
    const victim = spawn('sleep', ['30'], { stdio: 'ignore' });
    const dog = startWatchdog(victim.pid!);
    expect(dog).toBeDefined();
    dog!.stdin!.end(); // what the kernel does to the pipe when the parent dies
    const [code, signal] = (await once(victim, 'exit')) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGTERM' });
  });

  describe('without a usable Java', () => {
    it('says what to install when the java command does not exist', async () => {
      await expect(startDynamoDbLocal({ javaCommand: join(tmpdir(), 'no-such-dir-easel', 'java') })).rejects.toThrow(JAVA_REQUIRED_MESSAGE);
    });

    it('says what to install when java is not on PATH', async () => {
      const empty = await tempDir('easel-empty-path-');
      const path = process.env.PATH;
      process.env.PATH = empty;
      try {
        await expect(startDynamoDbLocal({ inMemory: true })).rejects.toThrow(JAVA_REQUIRED_MESSAGE);
      } finally {
        process.env.PATH = path;
      }
    });

    it('refuses Java older than 11', async () => {
      const fake = await fakeJava('java version "1.8.0_292"', 'exit 1');
      const error = await startDynamoDbLocal({ javaCommand: fake }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toContain(JAVA_REQUIRED_MESSAGE);
      expect((error as Error).message).toContain('1.8.0_292');
    });

    it('reads the major version from `java -version`', () => {
      expect(javaMajorVersion('openjdk version "17.0.15" 2025-04-15')).toBe(17);
      expect(javaMajorVersion('java version "1.8.0_292"')).toBe(8);
      expect(javaMajorVersion('openjdk version "21" 2023-09-19')).toBe(21);
      expect(javaMajorVersion('openjdk version "11.0.2"')).toBe(11);
      expect(javaMajorVersion('nonsense')).toBeUndefined();
    });
  });
});
