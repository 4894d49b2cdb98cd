// @ts-check
/**
 * Live updates without a stream held open: while the page is visible and its run can still
 * move (a timer, another tab, a queued turn, a form link), the run is read again with backoff —
 * 2 s, doubling to 30 s, back to 2 s whenever something happened — and not at all while the
 * page is hidden or the run has ended. Nothing waits on the server between two reads, so
 * pay-per-invocation hosting bills one short request per read.
 *
 * Timers are the page's `setTimeout` and `Date`, so a test drives them with a fake clock
 * (Playwright's `page.clock`) rather than waiting.
 */

/** The first delay, and the one after any activity. */
export const POLL_MIN_MS = 2_000;
/** The longest delay between two reads. */
export const POLL_MAX_MS = 30_000;

export class Poller {
  /**
   * @param {() => Promise<boolean>} read reads the run once; true when it moved (resets the delay)
   * @param {() => string | null} idle why there is nothing to read (no run, a finished run, a turn of ours running), or null
   * @param {(text: string) => void} show says what the poller does, for the page to show
   */
  constructor(read, idle, show) {
    this.read = read;
    this.idle = idle;
    this.show = show;
    this.delay = POLL_MIN_MS;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
    this.reading = false;
    /** @type {number | null} when the run was last read (epoch ms) */
    this.lastRead = null;
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') this.now();
      else this.schedule();
    });
  }

  /** Something happened (a turn, a reload): short delays again. */
  reset() {
    this.delay = POLL_MIN_MS;
    this.schedule();
  }

  /** Reads at once, then goes on from the shortest delay. */
  now() {
    this.delay = POLL_MIN_MS;
    this.stop();
    void this.tick();
  }

  stop() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The next read, after the current delay, if there is anything to read. */
  schedule() {
    this.stop();
    if (this.reading) return;
    if (document.visibilityState !== 'visible') return this.show('paused while the page is hidden');
    const idle = this.idle();
    if (idle !== null) return this.show(idle);
    this.timer = setTimeout(() => void this.tick(), this.delay);
    const last = this.lastRead === null ? '' : `read at ${new Date(this.lastRead).toLocaleTimeString()}, `;
    this.show(`${last}next read in ${Math.round(this.delay / 1000)} s`);
  }

  async tick() {
    this.stop();
    if (this.reading || document.visibilityState !== 'visible' || this.idle() !== null) return this.schedule();
    this.reading = true;
    this.show('reading…');
    let moved = false;
    try {
      moved = await this.read();
    } catch {
      // a failed read is retried at the next delay
    } finally {
      this.reading = false;
      this.lastRead = Date.now();
    }
    this.delay = moved ? POLL_MIN_MS : Math.min(this.delay * 2, POLL_MAX_MS);
    this.schedule();
  }
}

/**
 * What is left until `dueAt` as text: "4:05", "1:02:03"; "now" once it has passed.
 * @param {number} dueAt epoch ms @param {number} now epoch ms
 */
export function remaining(dueAt, now) {
  const seconds = Math.ceil((dueAt - now) / 1000);
  if (seconds <= 0) return 'now';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}
