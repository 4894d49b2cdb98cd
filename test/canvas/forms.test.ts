import { describe, expect, it } from 'vitest';
import {
  FIELD_TYPES,
  type FieldType,
  type FormField,
  fieldSatisfied,
  isEmptyValue,
  normalizeFieldValue,
} from '../../lib/canvas/forms';

function field(type: FieldType, extra: Partial<FormField> = {}): FormField {
  return { key: 'f', name: 'F', type, optional: false, value: null, ...extra };
}

const plans = field('options', { options: ['free', 'pro', '3'] });

describe('forms', () => {
  describe('normalizeFieldValue', () => {
    describe('accepts and converts valid values', () => {
      it.each<[string, FormField, unknown, unknown]>([
        ['line: text', field('line'), 'Ann', 'Ann'],
        ['line: text with spaces kept', field('line'), '  Ann ', '  Ann '],
        ['line: a number as text', field('line'), 42, '42'],
        ['line: a boolean as text', field('line'), false, 'false'],
        ['paragraph: multi-line text', field('paragraph'), 'a\nb', 'a\nb'],
        ['paragraph: a number as text', field('paragraph'), 1.5, '1.5'],
        ['options: an option', plans, 'pro', 'pro'],
        ['options: a number matching an option', plans, 3, '3'],
        ['options: any text when no options are listed', field('options'), 'anything', 'anything'],
        ['integer: a number', field('integer'), 42, 42],
        ['integer: zero', field('integer'), 0, 0],
        ['integer: a negative number', field('integer'), -7, -7],
        ['integer: a numeric string', field('integer'), '42', 42],
        ['integer: a signed numeric string with spaces', field('integer'), ' -7 ', -7],
        ['integer: "1e3"', field('integer'), '1e3', 1000],
        ['integer: an integral float', field('integer'), 4.0, 4],
        ['float: a float', field('float'), 3.25, 3.25],
        ['float: an integer', field('float'), 3, 3],
        ['float: a numeric string', field('float'), '3.25', 3.25],
        ['float: a leading-dot string', field('float'), '.5', 0.5],
        ['float: "1e3"', field('float'), '1e3', 1000],
        ['float: a negative exponent', field('float'), '-2.5e-3', -0.0025],
        ['number: a float', field('number'), -1.5, -1.5],
        ['number: a numeric string', field('number'), '+8', 8],
        ['number: "1e3"', field('number'), '1e3', 1000],
        ['boolean: true', field('boolean'), true, true],
        ['boolean: false', field('boolean'), false, false],
        ['boolean: "true"', field('boolean'), 'true', true],
        ['boolean: "false"', field('boolean'), 'false', false],
        ['object: an object', field('object'), { city: 'Oslo' }, { city: 'Oslo' }],
        ['object: a list', field('object'), [1, 2], [1, 2]],
        ['object: a JSON object string', field('object'), '{"city": "Oslo"}', { city: 'Oslo' }],
        ['object: a JSON list string', field('object'), '[1, {"a": 2}]', [1, { a: 2 }]],
        ['file: an id', field('file'), 'file-123', 'file-123'],
        ['file: a descriptor', field('file'), { id: 'f1', name: 'a.pdf' }, { id: 'f1', name: 'a.pdf' }],
        ['file: a list of ids and descriptors', field('file'), ['f1', { id: 'f2' }], ['f1', { id: 'f2' }]],
      ])('%s', (_label, f, submitted, expected) => {
        expect(normalizeFieldValue(f, submitted)).toEqual({ ok: true, value: expected });
      });
    });

    describe('refuses values of the wrong type', () => {
      it.each<[string, FormField, unknown]>([
        ['line: an object', field('line'), { a: 1 }],
        ['line: a list', field('line'), ['a']],
        ['paragraph: an object', field('paragraph'), { a: 1 }],
        ['options: an option not listed', plans, 'gold'],
        ['options: a number not listed', plans, 4],
        ['options: differently cased option', plans, 'Pro'],
        ['options: a boolean', plans, true],
        ['options: an object', plans, { v: 'pro' }],
        ['integer: a float', field('integer'), 4.5],
        ['integer: a float string', field('integer'), '4.5'],
        ['integer: a small exponent', field('integer'), '1e-1'],
        ['integer: text', field('integer'), 'abc'],
        ['integer: a number followed by text', field('integer'), '12abc'],
        ['integer: hex', field('integer'), '0x10'],
        ['integer: a boolean', field('integer'), true],
        ['integer: NaN', field('integer'), Number.NaN],
        ['integer: Infinity', field('integer'), Number.POSITIVE_INFINITY],
        ['integer: beyond the safe range', field('integer'), 2 ** 53],
        ['float: text', field('float'), 'abc'],
        ['float: "Infinity"', field('float'), 'Infinity'],
        ['float: an overflowing exponent', field('float'), '1e999'],
        ['float: NaN', field('float'), Number.NaN],
        ['float: a boolean', field('float'), false],
        ['float: a comma decimal', field('float'), '1,5'],
        ['number: an object', field('number'), { n: 1 }],
        ['boolean: "yes"', field('boolean'), 'yes'],
        ['boolean: 1', field('boolean'), 1],
        ['boolean: 0', field('boolean'), 0],
        ['boolean: an object', field('boolean'), { b: true }],
        ['object: invalid JSON', field('object'), '{"city": '],
        ['object: plain text', field('object'), 'Oslo'],
        ['object: JSON that is a number', field('object'), '42'],
        ['object: JSON that is a string', field('object'), '"Oslo"'],
        ['object: JSON null', field('object'), 'null'],
        ['object: a number', field('object'), 42],
        ['object: a boolean', field('object'), true],
        ['file: a number', field('file'), 42],
        ['file: a boolean', field('file'), true],
        ['file: a list with a number', field('file'), ['f1', 3]],
        ['file: a list with an empty id', field('file'), ['f1', ' ']],
        ['file: a list with null', field('file'), ['f1', null]],
        ['file: a nested list', field('file'), [['f1']]],
      ])('%s', (_label, f, submitted) => {
        const result = normalizeFieldValue(f, submitted);
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.message).toMatch(/\S/);
      });

      it('lists the options in the message', () => {
        expect(normalizeFieldValue(plans, 'gold')).toEqual({ ok: false, message: 'expected one of: free, pro, 3' });
      });
    });

    describe("RAGFlow's {type, value} dicts", () => {
      it.each<[string, FormField, unknown, unknown]>([
        ['line', field('line'), { type: 'line', value: 'Ann' }, 'Ann'],
        ['integer from a string', field('integer'), { type: 'integer', value: '42' }, 42],
        ['float', field('float'), { type: 'float', value: 2.5 }, 2.5],
        ['boolean from a string', field('boolean'), { type: 'boolean', value: 'false' }, false],
        ['options', plans, { type: 'options', value: 'free' }, 'free'],
        ['a value without a type on a non-object field', field('integer'), { value: 7 }, 7],
        ['file', field('file'), { type: 'file', value: ['f1'] }, ['f1']],
        ['object holding an object', field('object'), { type: 'object', value: { a: 1 } }, { a: 1 }],
        ['object holding JSON text', field('object'), { type: 'object', value: '{"a": 1}' }, { a: 1 }],
        ['object labelled with another known type', field('object'), { type: 'paragraph', value: '[1]' }, [1]],
      ])('unwraps %s', (_label, f, submitted, expected) => {
        expect(normalizeFieldValue(f, submitted)).toEqual({ ok: true, value: expected });
      });

      it.each<[string, unknown]>([
        ['a value key and no type', { value: 3, unit: 'kg' }],
        ['a value key and an unknown type', { type: 'measurement', value: 3 }],
        ['a value key and a non-string type', { type: 1, value: 3 }],
        ['only a value key', { value: 'x' }],
      ])('keeps an object field value with %s as the object itself', (_label, submitted) => {
        expect(normalizeFieldValue(field('object'), submitted)).toEqual({ ok: true, value: submitted });
      });

      it('checks the unwrapped value against the field type', () => {
        expect(normalizeFieldValue(field('integer'), { type: 'integer', value: 'many' }).ok).toBe(false);
        expect(normalizeFieldValue(plans, { type: 'options', value: 'gold' }).ok).toBe(false);
      });
    });

    describe('empty values become null', () => {
      const empties: [string, unknown][] = [
        ['undefined', undefined],
        ['null', null],
        ['an empty string', ''],
        ['blank text', '  \n\t'],
        ['an empty list', []],
        ['a dict with an empty value', { type: 'line', value: '' }],
        ['a dict with a null value', { type: 'integer', value: null }],
      ];
      const cases = FIELD_TYPES.flatMap((type) =>
        empties
          // An empty list is a real answer to an object field (see below).
          .filter(([label]) => !(type === 'object' && label === 'an empty list'))
          .map(([label, value]) => [type, label, value] as const),
      );

      it.each(cases)('%s field: %s', (type, _label, value) => {
        expect(normalizeFieldValue(field(type), value)).toEqual({ ok: true, value: null });
      });

      it.each<[string, unknown, unknown]>([
        ['an empty list', [], []],
        ['an empty object', {}, {}],
        ['an empty JSON list', '[]', []],
        ['a dict holding an empty list', { type: 'object', value: [] }, []],
      ])('keeps %s as the answer of an object field', (_label, submitted, expected) => {
        expect(normalizeFieldValue(field('object'), submitted)).toEqual({ ok: true, value: expected });
      });
    });

    it.each<[FieldType, unknown]>([
      ['integer', 0],
      ['float', 0],
      ['number', 0],
      ['boolean', false],
      ['line', 0],
    ])('keeps the falsy but present value %j of a %s field', (type, value) => {
      const result = normalizeFieldValue(field(type), value);
      expect(result.ok).toBe(true);
      expect(result.ok && result.value).not.toBeNull();
    });
  });

  describe('isEmptyValue', () => {
    it.each<[string, unknown, FieldType | undefined, boolean]>([
      ['an empty list for an object field', [], 'object', false],
      ['an empty object for an object field', {}, 'object', false],
      ['an empty list for a file field', [], 'file', true],
      ['an empty list for a line field', [], 'line', true],
      ['blank text for an object field', '  ', 'object', true],
      ['null for an object field', null, 'object', true],
    ])('%s (by field type)', (_label, value, type, expected) => {
      expect(isEmptyValue(value, type)).toBe(expected);
    });

    it.each<[string, unknown, boolean]>([
      ['undefined', undefined, true],
      ['null', null, true],
      ['an empty string', '', true],
      ['blank text', ' \t\n', true],
      ['an empty list', [], true],
      ['text', 'a', false],
      ['text with spaces around', ' a ', false],
      ['zero', 0, false],
      ['false', false, false],
      ['a list with one element', [null], false],
      ['an object', { a: 1 }, false],
    ])('%s', (_label, value, expected) => {
      expect(isEmptyValue(value)).toBe(expected);
    });
  });

  describe('fieldSatisfied', () => {
    const required = field('line');
    const optional = field('line', { optional: true });
    const requiredFile = field('file');
    const optionalFile = field('file', { optional: true });

    it.each<[string, FormField, unknown, boolean, boolean]>([
      ['a required field with a value', required, 'Ann', false, true],
      ['a required field with a falsy value', field('integer'), 0, false, true],
      ['a required field with false', field('boolean'), false, false, true],
      ['a required field without a value', required, null, false, false],
      ['a required field without a value, form settled', required, null, true, false],
      ['a required field with blank text, form settled', required, '   ', true, false],
      ['a required file field without a value', requiredFile, null, false, false],
      ['a required file field without a value, form settled', requiredFile, [], true, false],
      ['an optional field with a value', optional, 'x', false, true],
      ['an optional field without a value, form not settled', optional, null, false, false],
      ['an optional field without a value, form settled', optional, null, true, true],
      ['an optional file field without a value, form not settled', optionalFile, null, false, true],
      ['an optional file field without a value, form settled', optionalFile, undefined, true, true],
      ['an optional file field with an empty list, form not settled', optionalFile, [], false, true],
      ['a required file field with an empty list', requiredFile, [], false, false],
      ['a required object field answered with an empty list', field('object'), [], false, true],
      ['a required object field with blank text', field('object'), ' ', true, false],
    ])('%s', (_label, f, value, settled, expected) => {
      expect(fieldSatisfied(f, value, settled)).toBe(expected);
    });
  });
});
