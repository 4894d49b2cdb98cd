/**
 * Message: shows text to the user. One of its `content` templates is picked at random (the
 * choice is reproducible across pauses); references to a streaming producer (an LLM answer)
 * are passed through delta by delta when `stream` is on.
 *
 * A template with Jinja tags (`{% ... %}`, `{{ ... }}`) is rendered whole by the interpreter,
 * as RAGFlow does: its references are settled first (see template-references.ts), the text is
 * sent as one message, and the render runs under the caps of jinja.ts. The interpreter is
 * loaded on the first such template.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { hasJinja, renderJinja } from './jinja';
import { bindReferences } from './template-references';

const params = z.lazy(() => z.looseObject({
  content: z
    .union([z.string(), z.array(z.string())])
    .transform((c) => (Array.isArray(c) ? c : [c]).filter((t) => t.trim() !== ''))
    .pipe(z.array(z.string()).min(1, 'needs at least one non-empty template')),
  stream: z.boolean().nullish().transform((v) => v ?? true),
}));

export const message = defineComponent({
  name: 'Message',
  params,
  defaultOutput: 'content',
  streamsInput: true,
  async invoke(p, ctx) {
    const template = p.content[Math.floor(ctx.random() * p.content.length)] as string;
    let content = '';
    if (hasJinja(template)) {
      const { source, variables } = await bindReferences(template, ctx);
      content = await renderJinja(source, variables);
      ctx.message(content);
    } else if (p.stream) {
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
