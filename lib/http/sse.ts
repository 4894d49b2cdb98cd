/** Server-sent events framing of the native API: `event: <name>` and `data: <json>`. */

const encoder = new TextEncoder();

export function frame(event: string, data: unknown): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
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
export function eventStream(): { stream: ReadableStream<Uint8Array>; send(event: string, data: unknown): void; close(): void } {
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
    send(event, data) {
      if (!open) return;
      try {
        controller?.enqueue(frame(event, data));
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
        // already closed by the reader
      }
    },
  };
}
