/** Reads a native SSE stream (`event: <name>` / `data: <json>` frames) as it arrives. */

export interface SseFrame {
  event: string;
  data: unknown;
  /** The frame's `id:` (a cursor to reconnect from), when it has one. */
  id?: string;
}

/** One frame's text (without the blank line): its event name and its data, JSON-parsed when it is JSON. */
export function parseFrame(block: string): SseFrame | null {
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  }
  if (data.length === 0) return null;
  const text = data.join('\n');
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: the text as it is
  }
  return { event, data: parsed, ...(id !== undefined ? { id } : {}) };
}

export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, '\n');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (frame) yield frame;
      }
      if (done) break;
    }
    const last = parseFrame(buffer + decoder.decode());
    if (last) yield last;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
