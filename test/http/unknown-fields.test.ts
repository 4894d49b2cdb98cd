/**
 * Unknown fields of strict bodies (lib/http/unknown-fields.ts): the field meant is found by a
 * nested object's names, by spelling and by a table of other APIs' names; the known names are
 * the schema's own, so a field added to the execute body is known without a list to update.
 */
import { z } from '@hono/zod-openapi';
import { describe, expect, it } from 'vitest';
import { ExecuteBody } from '../../lib/http/schemas';
import { closestName, editDistance, intendedField } from '../../lib/http/unknown-fields';

describe('the field meant', () => {
  it('is the same name in another case or with other separators', () => {
    expect(closestName('runId', ['run_id', 'turn_number'])).toBe('run_id');
    expect(closestName('Turn-Number', ['run_id', 'turn_number'])).toBe('turn_number');
  });

  it('is the nearest name within a quarter of its length, and none when two are as near', () => {
    expect(closestName('querry', ['query', 'inputs'])).toBe('query');
    expect(closestName('callbak_url', ['callback_url'])).toBe('callback_url');
    expect(closestName('colour', ['query', 'inputs'])).toBeUndefined();
    expect(closestName('ab', ['aa', 'bb'])).toBeUndefined();
  });

  it('is a nested object’s field sent one level too high, before any spelling', () => {
    const shape = ExecuteBody.shape;
    expect(intendedField('inputs', shape)).toBe('run_input.inputs');
    expect(intendedField('command', shape)).toBe('run_input.command');
    expect(intendedField('session_id', shape, { session_id: 'run_id' })).toBe('run_id');
    expect(intendedField('zzz', shape)).toBeUndefined();
  });

  it('counts insertions, deletions and substitutions', () => {
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('same', 'same')).toBe(0);
  });
});

describe('the known names', () => {
  it('are read from the schema: a field added to the execute body is taken and suggested', () => {
    expect(ExecuteBody.safeParse({ run_input: { query: 'hi' }, priority_level: 'high' }).success).toBe(false);
    const grown = ExecuteBody.extend({ priority_level: z.enum(['low', 'high']).optional() });
    expect(grown.safeParse({ run_input: { query: 'hi' }, priority_level: 'high' }).success).toBe(true);
    const refused = grown.safeParse({ priorityLevel: 'high' });
    expect(refused.error?.issues[0]?.message).toBe(`unknown field; did you mean priority_level? The body takes ${[...Object.keys(ExecuteBody.shape), 'priority_level'].join(', ')}`);
  });
});
