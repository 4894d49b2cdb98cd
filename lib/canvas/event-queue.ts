/**
 * An unbounded single-reader queue: components of a batch run concurrently, each writing into
 * its own queue, and the engine drains the queues in batch order so the event sequence is the
 * same however the work interleaves.
 */
export class EventQueue<T> {
  private readonly items: T[] = [];
  private closed = false;
  private wake: (() => void) | undefined;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.notify();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }

  async *drain(): AsyncGenerator<T, void, undefined> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift() as T;
      if (this.closed) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
