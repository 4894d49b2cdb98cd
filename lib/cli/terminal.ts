/**
 * Terminal input and output for the interactive commands: a line reader that never loses a
 * line (piped input arrives all at once, before anything asks for it) and a spinner that only
 * draws on a TTY.
 */
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

export interface Output extends Pick<Writable, 'write'> {
  isTTY?: boolean;
}

export interface Io {
  stdin: Readable & { isTTY?: boolean };
  stdout: Output;
  stderr: Output;
  env: Readonly<Record<string, string | undefined>>;
}

/** Lines from stdin, asked for one at a time; `null` once the input ended (Ctrl-D, end of pipe). */
export class LineReader {
  private readonly rl: Interface;
  private readonly queue: string[] = [];
  private waiter: ((line: string | null) => void) | null = null;
  private ended = false;
  private readonly interactive: boolean;

  constructor(
    input: Readable & { isTTY?: boolean },
    private readonly output: Output,
    onInterrupt?: () => void,
  ) {
    this.interactive = Boolean(input.isTTY && output.isTTY);
    this.rl = createInterface({ input, ...(this.interactive ? { output: output as unknown as NodeJS.WritableStream } : {}), terminal: this.interactive });
    this.rl.on('line', (line) => {
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = null;
        w(line);
      } else this.queue.push(line);
    });
    this.rl.on('close', () => {
      this.ended = true;
      const w = this.waiter;
      this.waiter = null;
      w?.(null);
    });
    if (onInterrupt) this.rl.on('SIGINT', onInterrupt);
  }

  /** Shows `prompt` and waits for a line. Piped answers are echoed so the transcript reads as a session. */
  async ask(prompt: string): Promise<string | null> {
    if (this.interactive) {
      this.rl.setPrompt(prompt);
      this.rl.prompt();
    } else this.output.write(prompt);
    const line = this.queue.length > 0 ? (this.queue.shift() as string) : this.ended ? null : await new Promise<string | null>((resolve) => (this.waiter = resolve));
    if (!this.interactive) this.output.write(line === null ? '\n' : `${line}\n`);
    else if (line === null) this.output.write('\n');
    return line;
  }

  close(): void {
    this.rl.close();
  }
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** A spinner with a label on the current line, erased by `stop()`; nothing unless `out` is a TTY. */
export function spinner(out: Output, label: string): { stop(): void } {
  if (!out.isTTY) return { stop() {} };
  let i = 0;
  const draw = () => out.write(`\r\x1b[2K${FRAMES[i++ % FRAMES.length]} ${label}`);
  draw();
  const timer = setInterval(draw, 80);
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      out.write('\r\x1b[2K');
    },
  };
}

/** Aligned columns; the last column is not padded. */
export function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd());
}
