/**
 * `cite` of LLM and Agent, as RAGFlow has it (on by default): when the pass has references,
 * the model is told to cite them (`citationPrompt`, after the system prompt), and once it has
 * answered, the references go on narrowed to the chunks it cited and their documents — or
 * all of them when it cited none. Without references nothing changes: no prompt, no narrowing.
 */
import type { ComponentContext } from '../canvas/component';
import { citationPrompt, citedPart } from '../knowledge/format';

/** Whether this answer is asked to cite: `cite` is not off and the pass has reference chunks. */
export function wantsCitations(p: { cite?: boolean | null | undefined }, ctx: ComponentContext): boolean {
  return p.cite !== false && Object.keys(ctx.reference().chunks).length > 0;
}

/** The system prompt additions for an answer that cites. */
export function citationInstructions(citing: boolean): string[] {
  return citing ? [citationPrompt()] : [];
}

/** Narrows the pass's references to what `answer` cited (nothing cited: all stay). */
export function keepCited(ctx: ComponentContext, answer: string): void {
  const part = citedPart(ctx.reference(), answer);
  if (part) ctx.keepReferences(part.chunkIds, part.docNames);
}
