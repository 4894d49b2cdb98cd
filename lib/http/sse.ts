/** Server-sent events: the native framing, a stream that never blocks its writer, and the start of a streamed turn. */
import { track } from './inflight';

const encoder = new TextEncoder();

/** One SSE frame; `id` (a cursor) is what a reconnecting client sends back as Last-Event-ID. */
export function frame(event: string, data: unknown, id?: string): Uint8Array {
  return encoder.encode(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/**
 * A stream fed by the caller that never blocks it: writes after the client left are dropped,
 * so the work behind the stream goes on to its end whatever the connection does.
 */
export function feedStream(): { stream: ReadableStream<Uint8Array>; write(chunk: string | Uint8Array): void; close(): void } {
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let open = true;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      open = false;
    },
  });
  return {
    stream,
    write(chunk) {
      if (!open) return;
      try {
        controller?.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk);
      } catch {
        open = false;
      }
    },
    close() {
      if (!open) return;
      open = false;
      try {
        controller?.close();
      } catch {
        // the reader closed it
      }
    },
  };
}

/**
 * Starts a streamed turn: `run` gets a callback to call on every event. Resolves with the turn
 * once its first event arrived — headers can go out — and rejects if the turn failed before
 * any event (a refusal answered with a plain error status). The turn is tracked so a Lambda
 * invocation waits for it.
 */
export async function startStreamedTurn<T>(run: (onFirstEvent: () => void) => Promise<T>): Promise<{ turn: Promise<T> }> {
  let started: () => void = () => undefined;
  const firstEvent = new Promise<void>((resolve) => {
    started = resolve;
  });
  const turn = run(() => started());
  track(turn);
  const early = await Promise.race([firstEvent.then(() => undefined), turn.then(() => undefined, (error: unknown) => ({ error }))]);
  if (early) throw early.error;
  // wrapped: an async function returning the promise itself would wait for it
  return { turn };
}
