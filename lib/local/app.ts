/**
 * The app `npm start` serves, on a runtime (lib/runtime) like every other entry point: with no
 * SQS queue configured, async and queued turns run in this process through the same batch
 * handler as the Lambda worker, and the local queue route is added; `pump()` does the pump
 * function's work (due form timers). Building it starts nothing and opens no connection.
 *
 * @example
 *   const local = buildLocalApp({ ...config, store: { ...config.store, endpoint } });
 *   const server = createAdaptorServer({ fetch: local.app.fetch });
 *   setInterval(() => void local.pump(), 5_000);
 */
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import type { EaselConfig } from '../config';
import { forwardedFor } from '../http/client-address';
import { type App, createApp } from '../http/app';
import { appDeps } from '../http/deps';
import { buildRuntime, type Logger, queueDeps, type Runtime } from '../runtime';
import type { StoreContext } from '../store/dynamo';
import { releaseSlot } from '../store/turn-slot';
import type { TurnLifecycle } from '../turns/lifecycle';
import { processBatch, QueueMessage } from '../turns/queue';
import { pumpDueTimers } from '../turns/timers';
import { createInProcessQueue } from './in-process-queue';
import { registerLocalQueueRoute } from './queue-route';

export interface LocalApp {
  app: App;
  runtime: Runtime;
  /** Resolves once the in-process worker has nothing in hand (immediately with an SQS queue). */
  queueIdle(): Promise<void>;
  /**
   * The server is stopping: the in-process queue delivers nothing more. The turns its messages
   * claimed would wait for a worker that never comes, so their claims are given back.
   */
  closeQueue(): void;
  /** Fires the form timers that are due. */
  pump(): ReturnType<typeof pumpDueTimers>;
  /** Webhook URLs are built on `url` (the server's, once it listens) unless EASEL_PUBLIC_URL says otherwise. */
  defaultPublicUrl(url: string): void;
}

/** Errors to stderr, `[easel] message {fields}`; the app's info lines are not printed. */
const consoleLogger: Logger = {
  info: () => undefined,
  error: (message, fields) => console.error(`[easel] ${message}`, JSON.stringify(fields ?? {})),
};

/** What the worker and the pump report, to stderr. */
const log = (message: string, fields: Record<string, unknown>) => console.error(`[easel] ${message}`, JSON.stringify(fields));

/** The peer of the request's socket; undefined when the app is called without node-server's bindings. */
function socketAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
}

export function buildLocalApp(config: EaselConfig, options: { logger?: Logger; lifecycle?: TurnLifecycle } = {}): LocalApp {
  const runtime = buildRuntime(config, { logger: options.logger ?? consoleLogger, ...(options.lifecycle ? { lifecycle: options.lifecycle } : {}) });
  const deps = appDeps(runtime);
  // the socket's address (node-server's bindings), not the Lambda event's
  deps.clientAddress = forwardedFor(socketAddress, config.http.trustedProxyHops);
  let queue: ReturnType<typeof createInProcessQueue> | undefined;
  if (!deps.enqueue) {
    // a turn aborted by a stop is given back: this queue, and any continuation, goes with the process
    const local = createInProcessQueue((records) => processBatch(queueDeps(runtime, { log, requeue: (message) => local.enqueue(message), onAbort: 'release' }), records));
    deps.enqueue = local.enqueue;
    // and a run's queued inputs (double-texting) as the turns ahead of them commit
    runtime.engine.enqueue = local.enqueue;
    queue = local;
  }
  const app = createApp(deps);
  if (queue) registerLocalQueueRoute(app, queue.enqueue);
  return {
    app,
    runtime,
    queueIdle: async () => queue?.idle(),
    closeQueue: () => queue?.close((body) => giveBackClaim(runtime.store, body)),
    pump: () => pumpDueTimers(runtime.engine, 100, log),
    defaultPublicUrl: (url) => {
      deps.publicUrl ??= url;
      // e-mailed form links need a whole URL: this server's, unless one was configured
      if (runtime.engine.formLinks) runtime.engine.formLinks.baseUrl ??= url;
    },
  };
}

/** A message the in-process queue will not deliver: the turn it claimed is given back. */
async function giveBackClaim(store: StoreContext, body: string): Promise<void> {
  let message: QueueMessage;
  try {
    message = QueueMessage.parse(JSON.parse(body));
  } catch {
    return;
  }
  if (!message.claim || !message.run_id) return;
  // a claim with inputs queued behind it is kept: the first request after the restart that finds
  // it run out hands it to the first of them (lib/store/inbox.ts)
  const released = await releaseSlot(store, message.tenant, message.run_id, message.claim);
  log(released ? 'queued turn given back: the server stopped before it ran' : 'queued turn kept for the inputs queued behind it: the server stopped before it ran', { tenant: message.tenant, run_id: message.run_id, turn: message.claim.turn });
}
