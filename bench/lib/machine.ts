/** The machine a run happened on, for the report and results.json. */
import { spawnSync } from 'node:child_process';
import os from 'node:os';

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  os: string;
  node: string;
  java: string;
  /** 1-minute load average when the run started: other work on the machine shows here. */
  loadAverage: number;
  /** The commit measured, `+changes` when the working tree had uncommitted changes. */
  commit: string;
}

export function describeMachine(): Machine {
  // `java -version` prints on stderr
  const probe = spawnSync('java', ['-version'], { encoding: 'utf8' });
  const java = `${probe.stderr ?? ''}${probe.stdout ?? ''}`.split('\n')[0]?.trim() || 'not found';
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    java,
    loadAverage: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
    commit: commit(),
  };
}

function commit(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const status = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' });
  return `${head.stdout.trim()}${status.stdout.trim() ? '+changes' : ''}`;
}
