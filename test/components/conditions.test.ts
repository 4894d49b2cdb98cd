import { describe, expect, it } from 'vitest';
import { ComponentError } from '../../lib/canvas/errors';
import {
  canonicalOperator,
  LOOP_OPERATORS,
  loopCompare,
  parseFloatStrict,
  SWITCH_OPERATORS,
  switchCompare,
  truthy,
} from '../../lib/components/conditions';

describe('conditions', () => {
  describe('switchCompare', () => {
    // [variable, operator, configured value, expected]
    const table: [unknown, string, unknown, boolean][] = [
      ['Hello World', 'contains', 'lo wo', true],
      ['Hello World', 'contains', 'xyz', false],
      [['Red', 'Blue'], 'contains', 'red', true],
      [['Red', 'Blue'], 'contains', 're', false],
      ['Hello World', 'not contains', 'xyz', true],
      ['Hello World', 'not contains', 'world', false],
      ['Hello', 'start with', 'He', true],
      ['Hello', 'start with', 'lo', false],
      ['Hello', 'end with', 'lo', true],
      ['Hello', 'end with', 'He', false],
      ['', 'empty', undefined, true],
      ['x', 'empty', undefined, false],
      ['x', 'not empty', undefined, true],
      ['', 'not empty', undefined, false],
      ['abc', '=', 'abc', true],
      ['abc', '=', 'abd', false],
      ['abc', '≠', 'abd', true],
      ['abc', '≠', 'abc', false],
      [5, '>', '3', true],
      [3, '>', '3', false],
      [5, '<', '3', false],
      [2, '<', '3', true],
      [3, '≥', '3', true],
      [2, '≥', '3', false],
      [3, '≤', '3', true],
      [4, '≤', '3', false],
    ];

    it('covers every operator', () => {
      expect(new Set(table.map(([, op]) => op))).toEqual(new Set(SWITCH_OPERATORS));
    });

    it.each(table)('%j %s %j -> %s', (left, op, right, expected) => {
      expect(switchCompare(left, op, right)).toBe(expected);
    });

    it.each<[unknown, string, unknown, boolean]>([
      ['HELLO world', 'contains', 'hello WORLD', true],
      ['Hello', 'not contains', 'HELLO', false],
      ['Hello', 'start with', 'hELL', true],
      ['Hello', 'end with', 'LLO', true],
      [['Apple', 'pear'], 'contains', 'APPLE', true],
      [['Apple', 'pear'], 'not contains', 'PEAR', false],
    ])('text operators ignore case: %j %s %j', (left, op, right, expected) => {
      expect(switchCompare(left, op, right)).toBe(expected);
    });

    it('compares = exactly, as RAGFlow does', () => {
      expect(switchCompare('Yes', '=', 'yes')).toBe(false);
      expect(switchCompare('Yes', '≠', 'yes')).toBe(true);
    });

    describe('numbers and booleans on the left coerce the value', () => {
      it.each<[unknown, string, unknown, boolean]>([
        [3, '=', '3', true],
        [3, '=', '3.0', true],
        [3, '=', ' 3 ', true],
        [3, '=', 3, true],
        [3, '≠', '4', true],
        [2.5, '<', '1e1', true],
        [-1, '<', '0', true],
        [10, '>', '9', true],
        [true, '=', '1', true],
        [false, '=', '0', true],
        [true, '>', '0', true],
        [false, '≠', '1', true],
        [true, '=', 1, true],
        [0, '=', '-0', true],
      ])('%j %s %j -> %s', (left, op, right, expected) => {
        expect(switchCompare(left, op, right)).toBe(expected);
      });

      it.each<[unknown, string, unknown]>([
        [5, '=', ''],
        [5, '=', '   '],
        [5, '=', undefined],
        [5, '=', null],
        [5, '>', 'abc'],
        [5, '<', '5 apples'],
        [true, '=', 'true'],
        [false, '≠', 'no'],
        [5, 'contains', 'x'],
      ])('throws a ComponentError for %j %s %j', (left, op, right) => {
        expect(() => switchCompare(left, op, right)).toThrow(ComponentError);
      });

      it('says what could not be compared', () => {
        expect(() => switchCompare(5, '>', 'abc')).toThrow(/5.*abc/);
      });
    });

    it.each<[string, string]>([
      ['!=', '≠'],
      ['>=', '≥'],
      ['<=', '≤'],
      ['==', '='],
      [' = ', '='],
      ['contains', 'contains'],
    ])('reads the operator %j as %j', (alias, canonical) => {
      expect(canonicalOperator(alias)).toBe(canonical);
    });

    it.each<[unknown, string, unknown, boolean]>([
      [5, '!=', '6', true],
      [5, '!=', '5', false],
      [5, '>=', '5', true],
      [5, '>=', '6', false],
      [5, '<=', '4', false],
      [5, '<=', '5', true],
      [5, '==', '5', true],
      ['abc', '==', 'abd', false],
    ])('accepts ASCII aliases: %j %s %j -> %s', (left, op, right, expected) => {
      expect(switchCompare(left, op, right)).toBe(expected);
    });

    describe('ordering', () => {
      it.each<[unknown, string, unknown, boolean]>([
        ['10', '>', '9', true], // numerically; lexicographically "10" < "9"
        ['9', '<', '10', true],
        ['2.50', '≥', '2.5', true],
        ['-3', '<', '-2', true],
        [' 7 ', '≤', '7', true],
        ['1e2', '>', '99', true],
      ])('orders numeric strings as numbers: %j %s %j', (left, op, right, expected) => {
        expect(switchCompare(left, op, right)).toBe(expected);
      });

      it.each<[unknown, string, unknown, boolean]>([
        ['apple', '<', 'banana', true],
        ['b', '>', 'a', true],
        ['abc', '≥', 'abc', true],
        ['abc', '≤', 'abd', true],
        ['10', '>', 'abc', false], // "1" sorts before "a"
        ['Zebra', '<', 'apple', true], // by code point, as Python does
      ])('orders other strings lexicographically: %j %s %j', (left, op, right, expected) => {
        expect(switchCompare(left, op, right)).toBe(expected);
      });

      it.each<[unknown, string, unknown]>([
        [[1, 2], '>', '0'],
        [{ a: 1 }, '<', 'b'],
        [null, '>', '1'],
        [undefined, '≤', 'a'],
      ])('throws a ComponentError ordering %j %s %j', (left, op, right) => {
        expect(() => switchCompare(left, op, right)).toThrow(ComponentError);
      });
    });

    describe('empty follows Python falsiness', () => {
      it.each<[string, boolean, unknown]>([
        ['0', true, 0],
        ['false', true, false],
        ['""', true, ''],
        ['[]', true, []],
        ['{}', true, {}],
        ['null', true, null],
        ['undefined', true, undefined],
        ['42', false, 42],
        ['true', false, true],
        ['"0"', false, '0'],
        ['" "', false, ' '],
        ['[0]', false, [0]],
        ['{"a": 0}', false, { a: 0 }],
      ])('%s is empty: %s', (_label, isEmpty, value) => {
        // A Switch item for empty/not empty carries no value.
        expect(switchCompare(value, 'empty', undefined)).toBe(isEmpty);
        expect(switchCompare(value, 'not empty', undefined)).toBe(!isEmpty);
      });
    });

    it('throws a ComponentError for an unknown operator', () => {
      expect(() => switchCompare('a', 'approximately', 'a')).toThrow(ComponentError);
      expect(() => switchCompare('a', 'is', 'a')).toThrow(/unsupported operator/);
    });

    it('throws a ComponentError when a text operator meets a non-text variable', () => {
      expect(() => switchCompare({ a: 1 }, 'start with', 'a')).toThrow(ComponentError);
    });
  });

  describe('loopCompare', () => {
    describe('string variables compare exactly (case-sensitive)', () => {
      it.each<[string, string, unknown, boolean]>([
        ['Hello', 'contains', 'ell', true],
        ['Hello', 'contains', 'HELL', false],
        ['Hello', 'not contains', 'xyz', true],
        ['Hello', 'not contains', 'ell', false],
        ['Hello', 'start with', 'He', true],
        ['Hello', 'start with', 'he', false],
        ['Hello', 'end with', 'llo', true],
        ['Hello', 'end with', 'LLO', false],
        ['Hello', 'is', 'Hello', true],
        ['Hello', 'is', 'hello', false],
        ['Hello', 'is not', 'hello', true],
        ['Hello', '=', 'Hello', true],
        ['Hello', '≠', 'Hello', false],
        ['Hello', '!=', 'World', true],
        ['42', 'is', 42, true],
        ['', 'empty', undefined, true],
        ['x', 'empty', undefined, false],
        ['x', 'not empty', undefined, true],
        ['', 'not empty', undefined, false],
      ])('%j %s %j -> %s', (variable, op, value, expected) => {
        expect(loopCompare(variable, op, value)).toBe(expected);
      });

      it.each(['>', '<', '≥', '≤', '>='])('rejects %j', (op) => {
        expect(() => loopCompare('b', op, 'a')).toThrow(ComponentError);
      });
    });

    describe('number variables take numeric constants', () => {
      it.each<[number, string, unknown, boolean]>([
        [5, '=', '5', true],
        [5, '=', 5, true],
        [5, 'is', '5.0', true],
        [5, '≠', '6', true],
        [5, 'is not', '5', false],
        [5, '>', '4', true],
        [5, '<', '4', false],
        [5, '≥', ' 5 ', true],
        [5, '≤', '4.9', false],
        [5, '>=', '5', true],
        [5, '<=', 5, true],
        [5, '==', '5', true],
        [0, 'empty', undefined, false],
        [0, 'not empty', undefined, true],
      ])('%j %s %j -> %s', (variable, op, value, expected) => {
        expect(loopCompare(variable, op, value)).toBe(expected);
      });

      it.each<[string, unknown]>([
        ['=', 'abc'],
        ['>', ''],
        ['=', undefined],
        ['contains', '5'],
        ['start with', '5'],
      ])('throws a ComponentError for %j with %j', (op, value) => {
        expect(() => loopCompare(5, op, value)).toThrow(ComponentError);
      });
    });

    describe('boolean variables', () => {
      it.each<[boolean, string, unknown, boolean]>([
        [true, 'is', true, true],
        [true, 'is', 'true', true],
        [true, 'is', ' TRUE ', true],
        [false, 'is', 'false', true],
        [false, 'is', true, false],
        [true, 'is', 'false', false],
        [true, 'is not', 'false', true],
        [true, 'is not', true, false],
        [true, 'empty', undefined, false],
        [false, 'not empty', undefined, true],
      ])('%j %s %j -> %s', (variable, op, value, expected) => {
        expect(loopCompare(variable, op, value)).toBe(expected);
      });

      it.each(['=', '≠', 'contains', '>'])('rejects %j', (op) => {
        expect(() => loopCompare(true, op, 'true')).toThrow(ComponentError);
      });
    });

    describe('list variables', () => {
      it.each<[unknown[], string, unknown, boolean]>([
        [[1, 2], 'contains', 2, true],
        [[1, 2], 'contains', 3, false],
        [['a', 'b'], 'not contains', 'c', true],
        [['a', 'b'], 'not contains', 'a', false],
        [[{ k: 1 }], 'contains', { k: 1 }, true],
        [[1, 2], 'is', [1, 2], true],
        [[1, 2], 'is', [2, 1], false],
        [[1, 2], 'is not', [2, 1], true],
        [[], 'empty', undefined, true],
        [[0], 'empty', undefined, false],
        [[0], 'not empty', undefined, true],
      ])('%j %s %j -> %s', (variable, op, value, expected) => {
        expect(loopCompare(variable, op, value)).toBe(expected);
      });

      it.each(['>', '=', 'start with', 'end with'])('rejects %j', (op) => {
        expect(() => loopCompare([1], op, '1')).toThrow(ComponentError);
      });
    });

    describe('object variables', () => {
      it.each<[Record<string, unknown>, string, boolean]>([
        [{}, 'empty', true],
        [{ a: 1 }, 'empty', false],
        [{ a: 1 }, 'not empty', true],
        [{}, 'not empty', false],
      ])('%j %s -> %s', (variable, op, expected) => {
        expect(loopCompare(variable, op, undefined)).toBe(expected);
      });

      it.each(['contains', 'is', '=', '>'])('rejects %j', (op) => {
        expect(() => loopCompare({ a: 1 }, op, 'a')).toThrow(ComponentError);
      });
    });

    describe('null variables', () => {
      it.each<[unknown, string, unknown, boolean]>([
        [null, 'empty', undefined, true],
        [undefined, 'empty', undefined, true],
        [null, 'not empty', undefined, false],
        [null, 'is', '', false],
        [undefined, '=', 'x', false],
      ])('%j %s %j -> %s', (variable, op, value, expected) => {
        expect(loopCompare(variable, op, value)).toBe(expected);
      });
    });

    it('names the operator and the type it does not fit', () => {
      expect(() => loopCompare(true, 'contains', 'x')).toThrow(/"contains".*boolean/);
    });

    it('throws a ComponentError for an unknown operator', () => {
      expect(() => loopCompare('a', 'approximately', 'a')).toThrow(ComponentError);
    });

    it('knows every Switch operator plus is / is not', () => {
      expect(new Set(LOOP_OPERATORS)).toEqual(new Set([...SWITCH_OPERATORS, 'is', 'is not']));
    });
  });

  describe('truthy', () => {
    it.each<[string, boolean, unknown]>([
      ['null', false, null],
      ['undefined', false, undefined],
      ['false', false, false],
      ['0', false, 0],
      ['-0', false, -0],
      ['NaN', false, Number.NaN],
      ['""', false, ''],
      ['[]', false, []],
      ['{}', false, {}],
      ['true', true, true],
      ['1', true, 1],
      ['-1', true, -1],
      ['"0"', true, '0'],
      ['"false"', true, 'false'],
      ['" "', true, ' '],
      ['[0]', true, [0]],
      ['{"a": null}', true, { a: null }],
    ])('%s is truthy: %s', (_label, expected, value) => {
      expect(truthy(value)).toBe(expected);
    });
  });

  describe('parseFloatStrict', () => {
    it.each<[string, unknown, number]>([
      ['a number', 2.5, 2.5],
      ['true', true, 1],
      ['false', false, 0],
      ['an integer string', '42', 42],
      ['a float string with spaces', ' 2.5 ', 2.5],
      ['a signed string', '-3', -3],
      ['a plus sign', '+3', 3],
      ['a leading dot', '.5', 0.5],
      ['a trailing dot', '5.', 5],
      ['an exponent', '1e3', 1000],
      ['an upper-case exponent', '2.5E-1', 0.25],
      ['inf', 'inf', Number.POSITIVE_INFINITY],
      ['-inf', '-inf', Number.NEGATIVE_INFINITY],
      ['Infinity', 'Infinity', Number.POSITIVE_INFINITY],
      ['+Infinity', '+Infinity', Number.POSITIVE_INFINITY],
      ['-Infinity', '-Infinity', Number.NEGATIVE_INFINITY],
    ])('reads %s', (_label, value, expected) => {
      expect(parseFloatStrict(value)).toBe(expected);
    });

    it('reads "nan" as NaN', () => {
      expect(parseFloatStrict('NaN')).toBeNaN();
    });

    it.each<[string, unknown]>([
      ['an empty string', ''],
      ['blank text', '   '],
      ['a word', 'abc'],
      ['a number with text after it', '12abc'],
      ['hex', '0x10'],
      ['a comma decimal', '1,5'],
      ['two dots', '1.2.3'],
      ['a lone sign', '-'],
      ['a lone dot', '.'],
      ['null', null],
      ['undefined', undefined],
      ['a list', [1]],
      ['an object', { n: 1 }],
    ])('refuses %s', (_label, value) => {
      expect(parseFloatStrict(value)).toBeUndefined();
    });
  });
});
