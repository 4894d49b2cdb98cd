/**
 * Text produced incrementally by a component (an LLM answer) and consumed by another (a
 * Message that shows it as it arrives). The source starts when first read, so a producer
 * whose output nobody reads live costs nothing until the engine settles it at the end of the
 * turn. Any number of readers each see every chunk; `text()` gives the whole.
 *
 * @example
 *   const s = new TextStream(llm.chat(prompt));
 *   for await (const delta of s.read()) send(delta);
 *   await s.text(); // the full answer, without calling the model again
 */
export class TextStream {
  private readonly chunks: string[] = [];
  private started = false;
  private finished = false;
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;
  private waiting: Promise<void> | undefined;

  constructor(private readonly source: AsyncIterable<string>) {}

  /** True once the source has ended (successfully or not). */
  get done(): boolean {
    return this.finished;
  }

  /** The error the source ended with, if any. */
  get error(): unknown {
    return this.failure?.error;
  }

  /** What has arrived so far (the whole text once `done`). */
  partialText(): string {
    return this.chunks.join('');
  }

  async *read(): AsyncGenerator<string, void, undefined> {
    this.start();
    let next = 0;
    for (;;) {
      while (next < this.chunks.length) yield this.chunks[next++] as string;
      if (this.finished) {
        if (this.failure) throw this.failure.error;
        return;
      }
      await this.changed();
    }
  }

  async text(): Promise<string> {
    for await (const _ of this.read()) {
      // reading to the end is the point
    }
    return this.chunks.join('');
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    void this.pump();
  }

  private async pump(): Promise<void> {
    try {
      for await (const chunk of this.source) {
        if (chunk) {
          this.chunks.push(chunk);
          this.notify();
        }
      }
    } catch (error) {
      this.failure = { error };
    }
    this.finished = true;
    this.notify();
  }

  private changed(): Promise<void> {
    this.waiting ??= new Promise<void>((resolve) => {
      this.wake = resolve;
    });
    return this.waiting;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    this.waiting = undefined;
    wake?.();
  }
}
