/**
 * A TCP proxy on 127.0.0.1 that simulates the network between Lambda and DynamoDB on AWS:
 * every byte a client sends is held `delayMs` before it goes on to the target, so each round
 * trip over a kept-alive connection takes `delayMs` longer (answers flow back at once).
 * DynamoDB Local answers in about a millisecond and a half on loopback; a DynamoDB call from a
 * Lambda in the same region takes a few. Bytes keep their order, a slow reader on either side
 * slows its writer (no unbounded buffering), and `close()` ends every connection.
 *
 * @example
 *   const proxy = await startLatencyProxy({ target: 'http://127.0.0.1:8000' });
 *   const { doc } = createDynamoClients({ endpoint: proxy.url }); // every call 4 ms slower
 *   await proxy.close();
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

/** The delay the bench adds to every DynamoDB round trip when it simulates AWS's network. */
export const SIMULATED_NETWORK_DELAY_MS = 4;

/** How every figure measured through the proxy is labelled: it is a simulation, not AWS. */
export function simulationLabel(delayMs: number = SIMULATED_NETWORK_DELAY_MS): string {
  return `simulation of AWS's network latency (+${delayMs} ms a round trip)`;
}

/** Bytes held for one connection past which its client is paused until they have gone on. */
const MAX_HELD_BYTES = 1024 * 1024;

export interface LatencyProxyOptions {
  /** The endpoint to forward to, e.g. DynamoDB Local's `http://127.0.0.1:8000`. */
  target: string;
  /** @default SIMULATED_NETWORK_DELAY_MS */
  delayMs?: number;
  /**
   * Runs `forward` after `ms`; calls with the same `ms` must run in the order they were made.
   * Tests pass a scheduler they advance by hand. @default setTimeout
   */
  hold?: (forward: () => void, ms: number) => void;
}

export interface LatencyProxy {
  /** `http://127.0.0.1:<port>`: use it as the endpoint instead of the target. */
  url: string;
  delayMs: number;
  /** Connections accepted so far. */
  connections(): number;
  /** Stops listening and ends every open connection. */
  close(): Promise<void>;
}

export async function startLatencyProxy(options: LatencyProxyOptions): Promise<LatencyProxy> {
  const delayMs = options.delayMs ?? SIMULATED_NETWORK_DELAY_MS;
  const hold = options.hold ?? ((forward, ms) => void setTimeout(forward, ms));
  const target = new URL(options.target);
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  const open = new Set<Socket>();
  let accepted = 0;

  // half-open on both sides: a client's FIN must not close the connection while bytes it sent
  // before it are still held; the FIN goes on to the target once they have (endUpstreamWhenFlushed)
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    accepted++;
    const upstream = connect({ host: target.hostname, port, allowHalfOpen: true });
    open.add(client).add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const held: Buffer[] = [];
    let heldBytes = 0;
    let clientEnded = false;
    let upstreamBlocked = false;

    const resumeClient = () => {
      if (!upstreamBlocked && heldBytes <= MAX_HELD_BYTES && client.isPaused()) client.resume();
    };
    const endUpstreamWhenFlushed = () => {
      if (clientEnded && held.length === 0 && !upstream.destroyed) upstream.end();
    };
    client.on('data', (chunk: Buffer) => {
      held.push(chunk);
      heldBytes += chunk.length;
      if (heldBytes > MAX_HELD_BYTES) client.pause();
      // holds of equal length fire in the order they were made: each forwards the oldest chunk
      hold(() => {
        const next = held.shift();
        if (!next || upstream.destroyed) return;
        heldBytes -= next.length;
        if (!upstream.write(next)) {
          upstreamBlocked = true;
          client.pause();
        }
        resumeClient();
        endUpstreamWhenFlushed();
      }, delayMs);
    });
    upstream.on('drain', () => {
      upstreamBlocked = false;
      resumeClient();
    });
    client.on('end', () => {
      clientEnded = true;
      endUpstreamWhenFlushed();
    });
    // answers are not delayed; pipe() pauses the target while the client is slow to read
    upstream.pipe(client);

    const teardown = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', teardown);
    upstream.on('error', teardown);
    // both directions are done (the client's bytes forwarded, the target's answer delivered)
    client.on('close', teardown);
    upstream.on('close', () => {
      // the target closed: whatever the client still sends has nowhere to go
      if (!client.writableEnded) client.end();
      open.delete(upstream);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('the latency proxy has no TCP address');

  return {
    url: `http://127.0.0.1:${address.port}`,
    delayMs,
    connections: () => accepted,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of open) socket.destroy();
      open.clear();
      await closed;
    },
  };
}
