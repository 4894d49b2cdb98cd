/**
 * Message: shows text to the user. One of its `content` templates is picked at random (the
 * choice is reproducible across pauses); references to a streaming producer (an LLM answer)
 * are passed through delta by delta when `stream` is on.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';

const params = z.looseObject({
  content: z
    .union([z.string(), z.array(z.string())])
    .transform((c) => (Array.isArray(c) ? c : [c]).filter((t) => t.trim() !== ''))
    .pipe(z.array(z.string()).min(1, 'needs at least one non-empty template')),
  stream: z.boolean().nullish().transform((v) => v ?? true),
});

export const message = defineComponent({
  name: 'Message',
  params,
  defaultOutput: 'content',
  streamsInput: true,
  check(p) {
    return p.content.some((t) => /\{%.*?%\}/s.test(t))
      ? [{ field: 'obj.params.content', message: 'Jinja blocks ({% ... %}) are not supported' }]
      : [];
  },
  async invoke(p, ctx) {
    const template = p.content[Math.floor(ctx.random() * p.content.length)] as string;
    let content = '';
    if (p.stream) {
      for await (const delta of ctx.renderStream(template)) {
        content += delta;
        ctx.message(delta);
      }
    } else {
      content = await ctx.render(template);
      ctx.message(content);
    }
    ctx.messageEnd();
    return { outputs: { content } };
  },
});
