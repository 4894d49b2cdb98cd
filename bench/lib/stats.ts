/** Small statistics and printing helpers shared by the measurements. */
import { readFileSync } from 'node:fs';

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Percentile by linear interpolation between closest ranks (p in 0..100). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = s[lo] as number;
  const b = s[hi] as number;
  return a + (b - a) * (rank - lo);
}

export const median = (values: readonly number[]) => percentile(values, 50);
export const p95 = (values: readonly number[]) => percentile(values, 95);

export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** A fixed number of decimals, without trailing noise on integers. */
export function fmt(value: number, decimals = 2): string {
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(decimals);
}

export function ratio(a: number, b: number): number {
  return b === 0 ? Number.NaN : a / b;
}

/** Prints a measurement's title and its method in one line. */
export function heading(title: string, method: string): void {
  console.log('');
  console.log(`## ${title}`);
  console.log(`method: ${method}`);
}

/** Prints a plain-text table: columns padded, numbers right-aligned. */
export function table(headers: readonly string[], rows: readonly (readonly (string | number)[])[]): void {
  const cells = [headers.map(String), ...rows.map((r) => r.map((c) => (typeof c === 'number' ? fmt(c) : c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const numeric = headers.map((_, i) =>
    rows.some((r) => typeof r[i] === 'number') &&
    rows.every((r) => typeof r[i] === 'number' || r[i] === '' || r[i] === '-' || /^[-+~$]?[\d.,]+ ?%?$/.test(String(r[i]))));
  const line = (r: readonly string[]) =>
    `| ${r.map((c, i) => (numeric[i] && r !== cells[0] ? c.padStart(widths[i] as number) : c.padEnd(widths[i] as number))).join(' | ')} |`;
  console.log(line(cells[0] as string[]));
  console.log(`|${widths.map((w, i) => (numeric[i] ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`);
  for (const r of cells.slice(1)) console.log(line(r));
}

/** "target <= 1.15: met" style verdicts. */
export function verdict(value: number, op: '<=' | '>=', target: number): string {
  const ok = op === '<=' ? value <= target : value >= target;
  return `${ok ? 'met' : 'MISSED'} (${fmt(value)} ${op === '<=' ? (ok ? '<=' : '>') : ok ? '>=' : '<'} ${target})`;
}

/** CPU time of this process so far, in microseconds (user + system). */
export function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

export function shuffle<T>(items: T[], random: () => number = Math.random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

/** Busy and total CPU time of the whole machine so far (ms, all cores), from /proc/stat; null elsewhere. */
export function machineCpu(): { busyMs: number; totalMs: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
    const hz = 100; // USER_HZ on Linux
    return { busyMs: ((total - idle) * 1000) / hz, totalMs: (total * 1000) / hz };
  } catch {
    return null;
  }
}
