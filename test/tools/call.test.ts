import { describe, expect, it } from 'vitest';
import { TransientError } from '../../lib/canvas';
import { isTransientStatus } from '../../lib/llm/errors';
import { OutboundError } from '../../lib/outbound';
import {
  callTool,
  createToolRegistry,
  type ToolCallHook,
  type ToolContext,
  ToolError,
  toolHttpError,
  ToolSuspendedError,
  ToolTimeoutError,
  ToolTransientError,
} from '../../lib/tools';
import { deferred, manualTimer, probeTool } from './support';

function context(signal: AbortSignal = new AbortController().signal): ToolContext {
  return { signal, services: {}, componentId: 'Agent:A', ordinal: 0, path: [], recordUsage: () => {} };
}

describe('callTool: timeouts', () => {
  it('aborts the call at its timeout and fails it as transient, without waiting on the clock', async () => {
    const { timer, armed, fireAll } = manualTimer();
    const started = deferred<AbortSignal>();
    const { tool } = probeTool((_, ctx) => {
      started.resolve(ctx.signal);
      return new Promise(() => {}); // never answers, and ignores its signal
    }, { timeoutMs: 1234 });
    const call = callTool(tool, {}, context(), createToolRegistry([], { timer }));
    const seen = await started.promise;
    expect(armed.map((t) => t.ms)).toEqual([1234]);
    expect(seen.aborted).toBe(false);
    fireAll();
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolTimeoutError);
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: 'unavailable', message: 'tool "probe": no answer within 1234 ms' });
    expect(seen.aborted).toBe(true);
    expect(seen.reason).toBe(error);
  });

  it('uses the registry default when the tool sets none, and disarms the timer once answered', async () => {
    const { timer, armed } = manualTimer();
    const { tool } = probeTool(async () => ({ kind: 'result', content: 'ok' }));
    const outcome = await callTool(tool, {}, context(), createToolRegistry([], { timer, defaultTimeoutMs: 42 }));
    expect(outcome).toEqual({ kind: 'result', content: 'ok' });
    expect(armed).toEqual([expect.objectContaining({ ms: 42, cancelled: true })]);
  });

  it('defaults to 30 s', () => {
    expect(createToolRegistry([]).defaultTimeoutMs).toBe(30_000);
  });

  it('ends the call when the turn is cancelled', async () => {
    const { timer } = manualTimer();
    const turn = new AbortController();
    const started = deferred();
    const { tool } = probeTool(() => {
      started.resolve();
      return new Promise(() => {});
    });
    const call = callTool(tool, {}, context(turn.signal), createToolRegistry([], { timer }));
    await started.promise;
    turn.abort();
    await expect(call).rejects.toThrow(ToolTransientError);
  });
});

describe('callTool: classification', () => {
  const registry = createToolRegistry([], { timer: manualTimer().timer });

  it.each([
    ['a thrown ToolError', () => Promise.reject(new ToolError('no such city'))],
    ['a returned ToolError', () => Promise.resolve({ kind: 'error' as const, error: new ToolError('no such city') })],
    ['any other thrown error', () => Promise.reject(new Error('no such city'))],
  ])('%s is permanent: an outcome for the model', async (_, behave) => {
    const outcome = await callTool(probeTool(behave).tool, {}, context(), registry);
    expect(outcome.kind).toBe('error');
    expect(outcome.kind === 'error' && outcome.error).toBeInstanceOf(ToolError);
    expect(outcome.kind === 'error' && outcome.error.message).toBe('no such city');
  });

  it.each([
    ['a thrown ToolTransientError', () => Promise.reject(new ToolTransientError('rate limited'))],
    ['a returned ToolTransientError', () => Promise.resolve({ kind: 'error' as const, error: new ToolTransientError('rate limited') })],
    ['a thrown TransientError of another module', () => Promise.reject(new TransientError('rate limited'))],
  ])('%s is transient: thrown, code unavailable', async (_, behave) => {
    await expect(callTool(probeTool(behave).tool, {}, context(), registry)).rejects.toMatchObject({ code: 'unavailable', message: 'rate limited' });
  });

  it('classifies outbound request failures by their own transient flag', async () => {
    const timeout = new OutboundError('timeout', 'https://api.example: no answer', { transient: true });
    await expect(callTool(probeTool(() => Promise.reject(timeout)).tool, {}, context(), registry)).rejects.toMatchObject({
      code: 'unavailable',
      message: 'tool "probe": https://api.example: no answer',
    });
    const invalid = new OutboundError('invalid_url', 'not a URL', { transient: false });
    expect(await callTool(probeTool(() => Promise.reject(invalid)).tool, {}, context(), registry)).toMatchObject({ kind: 'error', error: { message: 'not a URL' } });
  });

  it('classifies HTTP statuses as the model providers do', () => {
    for (const status of [400, 401, 403, 404, 408, 409, 422, 425, 429, 500, 502, 503]) {
      const error = toolHttpError('search', status, 'detail');
      expect(error instanceof TransientError, String(status)).toBe(isTransientStatus(status));
      expect(error.message).toBe(`tool "search": the service answered ${status}: detail`);
    }
  });

  it('turns an answer that is not an outcome into a permanent error', async () => {
    const outcome = await callTool(probeTool(async () => ({ kind: 'result', content: 7 }) as never).tool, {}, context(), registry);
    expect(outcome).toMatchObject({ kind: 'error', error: { message: 'tool "probe" returned no result' } });
  });

  it('passes a suspension through, and refuses one whose state is not JSON', async () => {
    const good = await callTool(probeTool(async () => ({ kind: 'suspend', state: { step: 1, ids: ['a'] }, prompt: 'Send it?' })).tool, {}, context(), registry);
    expect(good).toEqual({ kind: 'suspend', state: { step: 1, ids: ['a'] }, prompt: 'Send it?' });
    const bad = await callTool(probeTool(async () => ({ kind: 'suspend', state: { at: new Date(0) } as never, prompt: 'Send it?' })).tool, {}, context(), registry);
    expect(bad).toMatchObject({ kind: 'error', error: { message: 'tool "probe" suspended with a state that is not JSON' } });
  });

  it('lets a suspension raised inside a tool (a sub-Agent) go up as it is', async () => {
    await expect(callTool(probeTool(() => Promise.reject(new ToolSuspendedError('inner', 'ok?'))).tool, {}, context(), registry)).rejects.toBeInstanceOf(ToolSuspendedError);
  });
});

describe('callTool: the call hook', () => {
  it('sees every call, and may answer without running the tool (a replay)', async () => {
    const seen: unknown[] = [];
    const hook: ToolCallHook = async (call, run) => {
      seen.push(call);
      return call.ordinal === 1 ? { kind: 'result', content: 'recorded' } : run();
    };
    const registry = createToolRegistry([], { timer: manualTimer().timer, hook });
    const { tool, calls } = probeTool(async () => ({ kind: 'result', content: 'live' }));
    expect(await callTool(tool, { q: 'a' }, context(), registry, 'probe_0')).toEqual({ kind: 'result', content: 'live' });
    expect(await callTool(tool, { q: 'b' }, { ...context(), ordinal: 1, path: [2] }, registry, 'probe_0')).toEqual({ kind: 'result', content: 'recorded' });
    expect(calls.map((c) => c.args)).toEqual([{ q: 'a' }]);
    expect(seen).toEqual([
      { componentId: 'Agent:A', path: [], ordinal: 0, tool: 'probe_0', arguments: { q: 'a' } },
      { componentId: 'Agent:A', path: [2], ordinal: 1, tool: 'probe_0', arguments: { q: 'b' } },
    ]);
  });

  it('classifies what the hook throws like what a tool throws', async () => {
    const registry = createToolRegistry([], { hook: () => Promise.reject(new ToolTransientError('store down')) });
    await expect(callTool(probeTool(async () => ({ kind: 'result', content: 'x' })).tool, {}, context(), registry)).rejects.toMatchObject({ code: 'unavailable' });
  });
});
