/**
 * The Node server's side of a graceful stop (npm start): stop accepting connections, let every
 * request that may run a turn be answered, close each connection once its answer is out, and
 * at the end cut what is left (followers of a turn's events, idle keep-alive connections).
 * Which turns still run, and when they are aborted, is the caller's business (server.ts).
 *
 * @example
 *   const graceful = gracefulServer(server);
 *   const closed = graceful.stopAccepting();
 *   await graceful.answered();
 *   graceful.cut();
 *   await closed;
 */
import type { Server, ServerResponse } from 'node:http';

export interface GracefulServer {
  /** No new connections; answers from now on close theirs. Resolves once every connection is closed. */
  stopAccepting(): Promise<void>;
  /** Resolves once no request that may run a turn (any but GET and HEAD) is waiting for its answer. */
  answered(): Promise<void>;
  /** Closes every connection left. */
  cut(): void;
}

export function gracefulServer(server: Server): GracefulServer {
  let stopping = false;
  const answering = new Set<ServerResponse>();
  let wake: (() => void) | undefined;
  server.on('request', (req, res: ServerResponse) => {
    // a GET never runs a turn; a long one is a follower of a turn's events, cut at the end
    const runsTurns = req.method !== 'GET' && req.method !== 'HEAD';
    if (runsTurns) answering.add(res);
    res.once('close', () => {
      answering.delete(res);
      if (answering.size === 0) wake?.();
      // a keep-alive connection would otherwise stay open until its timeout
      if (stopping) setImmediate(() => server.closeIdleConnections());
    });
  });
  return {
    stopAccepting() {
      stopping = true;
      const closed = new Promise<void>((done) => server.close(() => done()));
      server.closeIdleConnections();
      return closed;
    },
    async answered() {
      while (answering.size > 0) await new Promise<void>((resolve) => (wake = resolve));
    },
    cut() {
      server.closeAllConnections();
    },
  };
}
