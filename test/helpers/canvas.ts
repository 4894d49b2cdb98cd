import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Canvas, type CanvasEvent, type CanvasOptions, compileWorkflow, type RunInput } from '../../lib/canvas';
import type { ComponentRegistry } from '../../lib/canvas/component';
import { builtinComponents } from '../../lib/components';

export function fixture(name: string): Record<string, unknown> {
  const path = fileURLToPath(new URL(`../fixtures/${name}.json`, import.meta.url));
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** A clock that advances 1 ms per reading: deterministic timestamps. */
export function steppingClock(start = Date.UTC(2026, 0, 1)): () => number {
  let t = start;
  return () => t++;
}

export function canvasFor(
  dsl: unknown,
  options: CanvasOptions = {},
  registry: ComponentRegistry = builtinComponents,
): Canvas {
  return Canvas.create(compileWorkflow(dsl, registry), { seed: 7, clock: steppingClock(), ...options });
}

export async function collect(events: AsyncIterable<CanvasEvent>): Promise<CanvasEvent[]> {
  const out: CanvasEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

export async function turn(canvas: Canvas, input: RunInput = {}): Promise<CanvasEvent[]> {
  return collect(canvas.run(input));
}

/** The text shown to the user in a turn: message deltas joined, one string per message. */
export function messages(events: readonly CanvasEvent[]): string[] {
  const out: string[] = [];
  let current = '';
  for (const e of events) {
    if (e.event === 'message') current += e.data.content;
    if (e.event === 'message_end') {
      out.push(current);
      current = '';
    }
  }
  return out;
}

export function names(events: readonly CanvasEvent[]): string[] {
  return events.map((e) => e.event);
}

export function last(events: readonly CanvasEvent[]): CanvasEvent {
  const e = events.at(-1);
  if (!e) throw new Error('no events');
  return e;
}
