/**
 * The bench's latency proxy (bench/lib/latency-proxy.ts): bytes toward the target wait for their
 * hold, in order; answers come back at once; a large stream passes whole under backpressure;
 * DynamoDB works through it; close() ends every connection. Holds are driven by hand, so nothing
 * here depends on the wall clock.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { type LatencyProxy, startLatencyProxy } from '../../bench/lib/latency-proxy';
import { createDynamoClients } from '../../lib/store/setup';
import { testTable } from '../helpers/dynamo';

/** A target that records what it receives and lets the test answer on the connection. */
async function target(): Promise<{ url: string; received(): Buffer; connection(): Promise<Socket>; close(): Promise<void> }> {
  const chunks: Buffer[] = [];
  const sockets: Socket[] = [];
  let arrived: ((s: Socket) => void) | undefined;
  const first = new Promise<Socket>((resolve) => (arrived = resolve));
  const server: Server = createServer((socket) => {
    sockets.push(socket);
    socket.on('data', (c: Buffer) => chunks.push(c));
    arrived?.(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    received: () => Buffer.concat(chunks),
    connection: () => first,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A scheduler the test advances: holds wait in `pending` until `release()`. */
function manualHolds() {
  const pending: { forward: () => void; ms: number }[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  return {
    hold: (forward: () => void, ms: number) => {
      pending.push({ forward, ms });
      for (const w of waiters.filter((x) => pending.length >= x.count)) w.resolve();
    },
    pending,
    /** Resolves once `count` holds have been asked for. */
    held: (count: number) => new Promise<void>((resolve) => (pending.length >= count ? resolve() : waiters.push({ count, resolve }))),
    release: () => pending.shift()?.forward(),
  };
}

/** Reads from `socket` until `predicate` holds for everything read so far. */
async function readUntil(socket: Socket, predicate: (all: Buffer) => boolean, seen: Buffer[] = []): Promise<Buffer> {
  while (!predicate(Buffer.concat(seen))) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    seen.push(chunk);
  }
  return Buffer.concat(seen);
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

describe('latency proxy', () => {
  it('holds what the client sends until its hold fires, in order, and answers at once', async () => {
    const upstream = await target();
    cleanup.push(upstream.close);
    const holds = manualHolds();
    const proxy: LatencyProxy = await startLatencyProxy({ target: upstream.url, delayMs: 4, hold: holds.hold });
    cleanup.push(proxy.close);
    const client = connect(Number(new URL(proxy.url).port), '127.0.0.1');
    await once(client, 'connect');

    client.write('first ');
    await holds.held(1);
    client.write('second');
    await holds.held(2);
    expect(holds.pending.map((h) => h.ms)).toEqual([4, 4]);
    expect(upstream.received().length).toBe(0);

    holds.release();
    const server = await upstream.connection();
    await readUntil(server, () => upstream.received().toString() === 'first ');
    // the answer is not held: it arrives while the second chunk still waits
    server.write('pong');
    expect((await readUntil(client, (all) => all.length >= 4)).toString()).toBe('pong');
    expect(upstream.received().toString()).toBe('first ');

    holds.release();
    await readUntil(server, () => upstream.received().toString() === 'first second');
    expect(upstream.received().toString()).toBe('first second');
    client.destroy();
  });

  it('passes 8 MB whole and in order while the client outpaces the holds', async () => {
    const upstream = await target();
    cleanup.push(upstream.close);
    // every hold fires on the next turn of the event loop: the client writes far faster
    const proxy = await startLatencyProxy({ target: upstream.url, hold: (forward) => void setImmediate(forward) });
    cleanup.push(proxy.close);
    const payload = randomBytes(8 * 1024 * 1024);
    const client = connect(Number(new URL(proxy.url).port), '127.0.0.1');
    await once(client, 'connect');
    client.end(payload);
    const server = await upstream.connection();
    await once(server, 'end');
    const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(upstream.received().length).toBe(payload.length);
    expect(digest(upstream.received())).toBe(digest(payload));
  });

  it('serves DynamoDB through it, and close() ends the open connections', async () => {
    const { endpoint, tableName } = testTable();
    const proxy = await startLatencyProxy({ target: endpoint });
    const { doc, client } = createDynamoClients({ endpoint: proxy.url });
    try {
      const Item = { pk: `T#proxy${randomBytes(4).toString('hex')}`, sk: 'x', value: 'through the proxy' };
      await doc.send(new PutCommand({ TableName: tableName, Item }));
      const read = await doc.send(new GetCommand({ TableName: tableName, Key: { pk: Item.pk, sk: 'x' }, ConsistentRead: true }));
      expect(read.Item).toEqual(Item);
      expect(proxy.connections()).toBeGreaterThan(0);

      const open = connect(Number(new URL(proxy.url).port), '127.0.0.1');
      await once(open, 'connect');
      const closed = once(open, 'close');
      await proxy.close();
      await closed;
      const refused = connect(Number(new URL(proxy.url).port), '127.0.0.1');
      const [error] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
      expect(error.code).toBe('ECONNREFUSED');
    } finally {
      client.destroy();
    }
  });
});
