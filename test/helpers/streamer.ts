/**
 * A test component that produces its `content` as a stream, the way an LLM answer arrives:
 * chunk by chunk, each after a turn of the event loop. `fail_after` makes the stream break.
 */
import { z } from 'zod';
import { defineComponent } from '../../lib/canvas/component';
import { ComponentError, TransientError } from '../../lib/canvas/errors';
import { TextStream } from '../../lib/canvas/text-stream';

export const streamerReads = { count: 0 };

export const streamer = defineComponent({
  name: 'Streamer',
  params: z.looseObject({
    text: z.string(),
    chunk: z.number().int().min(1).default(3),
    fail_after: z.number().int().nullish(),
    transient: z.boolean().default(false),
  }),
  defaultOutput: 'content',
  async invoke(p, ctx) {
    const text = await ctx.render(p.text);
    async function* chunks() {
      streamerReads.count++;
      for (let i = 0, n = 0; i < text.length; i += p.chunk, n++) {
        if (p.fail_after !== null && p.fail_after !== undefined && n >= p.fail_after) {
          if (p.transient) throw new TransientError('provider timed out');
          throw new ComponentError('the stream broke');
        }
        await new Promise((resolve) => setImmediate(resolve));
        yield text.slice(i, i + p.chunk);
      }
    }
    return { outputs: { content: new TextStream(chunks()) } };
  },
});
