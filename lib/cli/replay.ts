/**
 * `easel replay <workflow> --version N [--runs a,b | --sample n [--since ISO]] [--refuse]`:
 * starts a replay of recorded runs against a version, follows it with a progress bar (on a
 * terminal; one line per step otherwise) until every run is done, then prints what it found:
 * the runs that did not behave the same (where they first diverged, the components) and how
 * many calls were answered from records or went live.
 */
import { type EaselClient } from './client';
import { type Io, type Output, table } from './terminal';

export interface ReplayOptions {
  version: number;
  runs?: string[];
  sample?: number;
  since?: string;
  refuse?: boolean;
  json?: boolean;
  /** Between two reads of the progress. @default 500 */
  pollMs?: number;
}

interface ReplayView {
  replay_id: string;
  status: 'queued' | 'running' | 'done';
  runs_total: number;
  runs_done: number;
  summary: {
    outcomes: Record<string, number>;
    calls: { recorded: number; answered: number; live: number };
    runs: { run_id: string; outcome: string; components: string[] }[];
  };
}

interface RunResult {
  run_id: string;
  outcome: string;
  first_divergence: { turn: number; component_id: string | null } | null;
  components: { component_id: string }[];
  live_calls: unknown[];
  refused?: { turn: number; component_id: string | null; kind: string };
  stopped?: { turn: number; code: string };
  reason?: { code: string; message: string };
}

export async function replay(api: EaselClient, workflowId: string, options: ReplayOptions, io: Io): Promise<number> {
  const body = {
    version: options.version,
    runs: options.runs ?? { sample: options.sample, ...(options.since ? { since: options.since } : {}) },
    on_differ: options.refuse ? 'refuse' : 'live',
  };
  const path = `/workflows/v1/workflows/${encodeURIComponent(workflowId)}/replays`;
  let view = await api.json<ReplayView>('POST', path, body, `workflow "${workflowId}"`);
  const progress = progressBar(io.stderr, view.runs_total);
  if (!options.json) io.stderr.write(`Replaying ${view.runs_total} run${view.runs_total === 1 ? '' : 's'} of ${workflowId} against version ${options.version} (replay ${view.replay_id}).\n`);
  while (view.status !== 'done') {
    if (!options.json) progress.show(view.runs_done, diverging(view));
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 500));
    view = await api.json<ReplayView>('GET', `${path}/${view.replay_id}`, undefined, `replay "${view.replay_id}"`);
  }
  if (!options.json) progress.done(view.runs_done, diverging(view));

  const results: RunResult[] = [];
  let cursor: string | null = null;
  do {
    const page: { items: RunResult[]; next_cursor: string | null } = await api.json('GET', `${path}/${view.replay_id}/results${cursor ? `?cursor=${cursor}` : ''}`);
    results.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);

  if (options.json) {
    io.stdout.write(`${JSON.stringify({ ...view, results }, null, 2)}\n`);
    return 0;
  }
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const differing = results.filter((r) => r.outcome !== 'same');
  if (differing.length > 0) {
    const rows = differing.map((r) => [r.run_id, r.outcome, where(r), [...new Set(r.components.map((c) => c.component_id))].join(', ')]);
    for (const row of table([['RUN', 'OUTCOME', 'WHERE', 'COMPONENTS'], ...rows])) out(row);
  }
  const o = view.summary.outcomes;
  const counts = ['same', 'diverged', 'refused', 'skipped', 'error'].filter((k) => (o[k] ?? 0) > 0).map((k) => `${o[k]} ${k}`).join(', ');
  const c = view.summary.calls;
  out(`${view.runs_done} run${view.runs_done === 1 ? '' : 's'}: ${counts || 'none'}; calls: ${c.answered} answered from records, ${c.live} live`);
  return 0;
}

function diverging(view: ReplayView): number {
  return view.summary.runs.length;
}

/** Where a run stopped behaving the same: its first divergence, refusal, stop or reason. */
function where(r: RunResult): string {
  if (r.refused) return `turn ${r.refused.turn}: ${r.refused.kind} call of ${r.refused.component_id ?? '?'} refused`;
  if (r.stopped) return `turn ${r.stopped.turn}: input refused (${r.stopped.code})`;
  if (r.first_divergence) return `turn ${r.first_divergence.turn}${r.first_divergence.component_id ? `: ${r.first_divergence.component_id}` : ''}`;
  return r.reason ? r.reason.message : '';
}

const WIDTH = 30;

/** A bar redrawn in place on a terminal; elsewhere one line each time the count moves. */
function progressBar(out: Output, total: number): { show(done: number, differing: number): void; done(done: number, differing: number): void } {
  let last = -1;
  const line = (done: number, differing: number) => {
    const filled = total === 0 ? WIDTH : Math.round((done / total) * WIDTH);
    return `[${'#'.repeat(filled)}${'-'.repeat(WIDTH - filled)}] ${done}/${total} runs${differing > 0 ? `, ${differing} not the same` : ''}`;
  };
  return {
    show(done, differing) {
      if (out.isTTY) out.write(`\r\x1b[2K${line(done, differing)}`);
      else if (done !== last) out.write(`${line(done, differing)}\n`);
      last = done;
    },
    done(done, differing) {
      out.write(`${out.isTTY ? '\r\x1b[2K' : ''}${line(done, differing)}\n`);
    },
  };
}
