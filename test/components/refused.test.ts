import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileWorkflow, defineComponent } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { oneComponent, problemsOf } from '../helpers/data-flow';

describe('components Easel refuses by name', () => {
  it.each<[string, RegExp]>([
    ['Browser', /drives a headless web browser, which Easel does not provide/],
    ['DocGenerator', /renders document files \(PDF, DOCX, HTML\) into file storage, which Easel does not provide/],
    ['DocsGenerator', /renders document files/],
    ['PDFGenerator', /renders document files/],
    ['ExcelProcessor', /reads and writes spreadsheet files \(Excel, CSV\), which Easel does not provide/],
  ])('%s is refused at load, naming it and saying why', (name, reason) => {
    const id = `${name}:Node`;
    const problems = problemsOf(oneComponent(id, { content: 'x', output_format: 'pdf' }));
    expect(problems[0]).toEqual({ field: 'components', message: `unsupported components: ${name}` });
    expect(problems).toContainEqual({
      component_id: id,
      field: 'obj.component_name',
      message: expect.stringMatching(new RegExp(`^unsupported component "${name}": `)),
    });
    const own = problems.find((p) => p.component_id === id);
    expect(own?.message).toMatch(reason);
  });

  it('lists refused and unknown components together, sorted', () => {
    const definition = oneComponent('Browser:Web', {}, {}, {
      'ExcelProcessor:Sheet': { obj: { component_name: 'ExcelProcessor', params: {} }, downstream: ['Tokenizer:Kb'] },
      'Tokenizer:Kb': { obj: { component_name: 'Tokenizer', params: {} }, downstream: [] },
    });
    const problems = problemsOf(definition);
    expect(problems[0]).toEqual({ field: 'components', message: 'unsupported components: Browser, ExcelProcessor, Tokenizer' });
    expect(problems).toContainEqual({ component_id: 'Tokenizer:Kb', field: 'obj.component_name', message: 'unsupported component "Tokenizer"' });
  });

  it('refuses RAGFlow’s tools Easel does not offer on the canvas too, with the reason', () => {
    const problems = problemsOf(oneComponent('WenCai:Kb', {}));
    expect(problems).toContainEqual({ component_id: 'WenCai:Kb', field: 'obj.component_name', message: 'unsupported component "WenCai": it calls a regional market-data service Easel does not integrate' });
  });

  it('a host that provides the component replaces the refusal by registering it under the same name', async () => {
    const browser = defineComponent({
      name: 'Browser',
      params: z.looseObject({ prompts: z.string() }),
      invoke: (p) => ({ outputs: { content: `visited for: ${p.prompts}` } }),
    });
    const definition = oneComponent('Browser:Web', { prompts: 'news' }, {}, {
      'Message:Show': { obj: { component_name: 'Message', params: { content: ['{Browser:Web@content}'] } }, downstream: [] },
    });
    const registry = withComponents(browser);
    expect(() => compileWorkflow(definition, registry)).not.toThrow();
    expect(messages(await turn(canvasFor(definition, {}, registry)))).toEqual(['visited for: news']);
  });
});
