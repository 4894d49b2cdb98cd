/**
 * `npx easel chat <workflow>`: a conversation in the terminal. Messages stream as the server sends
 * them (a spinner runs until the first one, on a TTY only); when the run pauses, its form is
 * asked field by field; a turn answered elsewhere (409) reloads the run and goes on from there.
 * Ends at the end of input (Ctrl-D, end of a pipe), at /quit, or when the run is finished.
 */
import { ApiError, type EaselClient, type ExecuteBody, type RunState } from './client';
import { askForm } from './forms';
import type { SseFrame } from './sse';
import { type Io, LineReader, type Output, spinner } from './terminal';

/** Prints streamed `message` deltas as they come, one message per paragraph. */
export class MessagePrinter {
  private open = false;

  constructor(
    private readonly out: Output,
    private readonly notes: Output,
    private readonly prefix = '',
  ) {}

  onEvent(frame: SseFrame): void {
    const data = (frame.data ?? {}) as { content?: unknown; error?: { message?: string }; steps?: number };
    switch (frame.event) {
      case 'message':
        if (!this.open) this.out.write(this.prefix);
        this.open = true;
        this.out.write(typeof data.content === 'string' ? data.content : JSON.stringify(data.content ?? ''));
        break;
      case 'message_end':
        this.end();
        break;
      case 'workflow_failed':
        this.end();
        this.notes.write(`the workflow failed: ${data.error?.message ?? 'unknown error'}\n`);
        break;
      case 'workflow_aborted':
        this.end();
        this.notes.write(`the run was stopped by the loop-safety budget after ${data.steps ?? '?'} steps\n`);
        break;
      case 'workflow_cancelled':
        this.end();
        this.notes.write('the run was cancelled\n');
        break;
      default:
    }
  }

  end(): void {
    if (this.open) this.out.write('\n');
    this.open = false;
  }
}

/** One turn with its messages printed live and a spinner (TTY only) until the first output. */
export async function printedTurn(client: EaselClient, workflowId: string, body: ExecuteBody, out: Output, notes: Output, prefix = '', how: 'stream' | 'async' = 'stream'): Promise<RunState> {
  const turn = body.turn_number !== undefined ? body.turn_number + 1 : 1;
  const spin = spinner(out, `running turn ${turn}…`);
  const printer = new MessagePrinter(out, notes, prefix);
  const onEvent = (frame: SseFrame) => {
    if (frame.event === 'message' || frame.event.startsWith('workflow_')) spin.stop();
    printer.onEvent(frame);
  };
  let run: RunState;
  try {
    run = how === 'async'
      ? await client.asyncTurn(workflowId, body, onEvent, (accepted) => {
        notes.write(`· turn ${accepted.turn_number} is running in the server's worker (run ${accepted.run_id}); following it\n`);
      })
      : await client.turn(workflowId, body, onEvent);
  } finally {
    spin.stop();
    printer.end();
  }
  // a stand-in answered in place of a model: said beside its answers
  if (run.stand_in) notes.write(`· note: answered by the ${run.stand_in.model} stand-in, not a language model (${run.stand_in.component_ids.join(', ')}). ${run.stand_in.notice}\n`);
  // text the run could not use is said so, instead of the form coming back without a word
  if (run.notice) notes.write(`· ${noticeLine(run.notice)}\n`);
  return run;
}

/** A turn's notice as one line for the terminal. */
export function noticeLine(notice: { code: string; message: string }): string {
  if (notice.code === 'query_not_used') return 'not used: the run waits for its form, and your text answers none of its fields (it was recorded); the form is asked again';
  return `note: ${notice.message}`;
}

const RELOADING = new Set(['turn_conflict', 'turn_in_progress', 'not_waiting_for_input', 'run_finished']);

export async function chat(client: EaselClient, workflowId: string, options: { runId?: string }, io: Io): Promise<number> {
  const out = io.stdout;
  const lines = new LineReader(io.stdin, out, () => lines.close());
  const getRun = (id: string) => client.json<RunState>('GET', `/workflows/v1/workflow-runs/${encodeURIComponent(id)}`, undefined, `run "${id}"`);
  try {
    const workflow = await client.json<{ id: string; name: string }>('GET', `/workflows/v1/workflows/${encodeURIComponent(workflowId)}`, undefined, `workflow "${workflowId}"`);
    out.write(`Chatting with "${workflow.name}" (${workflow.id}) at ${client.baseUrl}. Type a message; /new starts a new run, /quit or Ctrl-D ends.\n`);
    let run: RunState | null = null;
    if (options.runId) {
      run = await getRun(options.runId);
      if (run.workflow_id && run.workflow_id !== workflow.id) throw new ApiError(404, { code: 'not_found', error: 'run not found' }, `run "${options.runId}" belongs to workflow "${run.workflow_id}", not "${workflow.id}"`);
      out.write(`Resumed run ${run.run_id} at turn ${run.turn_number} (${run.status}).\n`);
    }
    const bye = () => {
      out.write(run ? `Bye. Run ${run.run_id} is at turn ${run.turn_number} (${run.status}).\n` : 'Bye.\n');
      return 0;
    };
    for (;;) {
      let body: ExecuteBody | undefined;
      let text: string;
      const at = run ? { run_id: run.run_id, turn_number: run.turn_number } : {};
      if (run && run.status === 'waiting_for_input' && run.next_input_hint) {
        const form = await askForm(run.next_input_hint, lines, out, (path) => client.upload(path));
        if (form.kind === 'ended') {
          // Ctrl-D at a form: nothing was sent, the run waits; how to come back is the last word
          out.write(`\nThe form was not sent; run ${run.run_id} waits at turn ${run.turn_number}. Continue with: npx easel chat ${workflow.id} --run-id ${run.run_id}\n`);
          return 0;
        }
        if (form.kind === 'inputs') body = { ...at, run_input: { inputs: form.inputs } };
        text = form.kind === 'command' ? form.command : '';
      } else if (run?.is_terminal) {
        out.write(`The run has finished (${run.status}).\n`);
        return 0;
      } else {
        const line = await lines.ask('you> ');
        if (line === null) return bye();
        text = line.trim();
        if (text === '') continue;
      }
      if (!body) {
        if (text === '/quit' || text === '/exit') return bye();
        if (text === '/new') {
          run = null;
          out.write('New run: your next message starts it.\n');
          continue;
        }
        if (text === '/stop' && run?.status !== 'waiting_for_input') {
          // a finished pass has nothing to stop: a stop would only add a cancelled turn
          out.write(run ? `Nothing to stop: run ${run.run_id} is ${run.status.replaceAll('_', ' ')}. /new starts a new run, /quit ends.\n` : 'Nothing to stop: no run has started.\n');
          continue;
        }
        body = text === '/stop' && run ? { ...at, run_input: { command: 'stop' } } : { ...at, run_input: { query: text } };
      }
      try {
        run = await printedTurn(client, workflow.id, body, out, out, 'assistant> ');
        out.write(`· turn ${run.turn_number}: ${run.status.replaceAll('_', ' ')}${run.turn_number === 1 ? ` (run ${run.run_id})` : ''}\n`);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.body.code === 'invalid_inputs') {
          out.write(`${error.message}\n`);
          continue; // the same form again
        }
        if (!run || !RELOADING.has(error.body.code)) throw error;
        out.write(`${error.message}\nReloading the run.\n`);
        run = await getRun(run.run_id);
        out.write(`Run ${run.run_id} is at turn ${run.turn_number} (${run.status}).\n`);
      }
    }
  } finally {
    lines.close();
  }
}
