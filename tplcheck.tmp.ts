import { readFileSync, readdirSync } from 'node:fs';
import { compileWorkflow } from './lib/canvas';
import { builtinComponents } from './lib/components';
const dir = '/work/shared/ragflow/agent/templates';
for (const f of readdirSync(dir).sort()) {
  const t = JSON.parse(readFileSync(`${dir}/${f}`, 'utf8'));
  try { compileWorkflow(t.dsl, builtinComponents); console.log('OK  ', f, t.canvas_type); }
  catch (e: any) { console.log('FAIL', f, t.canvas_type, (e.problems ?? []).map((p: any) => `${p.component_id}:${p.field}:${p.message}`).join(' | ').slice(0, 300) || e.message); }
}
