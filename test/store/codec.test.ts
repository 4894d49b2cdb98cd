/**
 * The codec of stored payloads: parts in one stream, long strings in blobs, and the two ways a
 * turn record's stream is compressed (brotli in records written before the dictionary, deflate
 * with the frozen record dictionary since).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BLOB_THRESHOLD, decodeParts, encodeParts, type PartsCodec } from '../../lib/store/codec';
import { RECORD_DICTIONARY_V1 } from '../../lib/store/record-dictionary';

/** A turn record's parts as the bench workflow's answer turn writes them (shape and size alike). */
function turnParts(n: number): Record<string, unknown> {
  const event = (name: string, id: string, extra: Record<string, unknown> = {}) => ({
    event: name,
    data: { component_id: id, component_name: id, component_type: id.split(':')[0], created_at: 1796192979.147 + n, inputs: null, ...extra },
  });
  const ids = ['UserFillUp:Details', 'VariableAssigner:KeepName', 'Message:Thanks', 'VariableAssigner:Note', 'Message:Done'];
  return {
    s: { v: 1, status: 'completed', frontier: [], nodes: { 'Message:Done': { outputs: { content: `Done: question ${n} / Ada` } } }, globals: { 'sys.query': `question ${n}`, 'sys.conversation_turns': n } },
    h: [['assistant', `Thanks Ada ${n}, plan pro.`]],
    q: { workflow_id: 'wf1', run_id: 'a'.repeat(32), turn_number: null, version: null, command: null, run_input: { inputs: { name: `Ada ${n}`, plan: 'pro' } } },
    R: {
      run_id: 'a'.repeat(32),
      status: 'completed',
      turn_number: n,
      events: ids.flatMap((id) => [event('node_started', id, { thoughts: '' }), event('node_finished', id, { outputs: { content: `output ${n}` }, error: null, elapsed_time: 0 })]),
    },
  };
}

describe('the record dictionary', () => {
  it('is frozen: records written with it are read with it', () => {
    // a changed dictionary makes every stored record unreadable: a new one is a new version
    expect(RECORD_DICTIONARY_V1.length).toBe(8192);
    expect(createHash('sha256').update(RECORD_DICTIONARY_V1, 'utf8').digest('hex')).toBe('7767405dae2c6aceddd01efa9dce08f08f6f37502580a57759cb712b8a9d97d3');
  });
});

describe('parts in one stream', () => {
  it.each<PartsCodec>(['dict1', 'brotli'])('come back as they went in (%s), only the parts asked for', (codec) => {
    const parts = turnParts(7);
    const encoded = encodeParts(parts, {}, codec);
    expect(decodeParts(encoded.bytes, ['s', 'R'], new Map(), codec)).toEqual({ s: parts.s, R: parts.R });
    expect(decodeParts(encoded.bytes, ['h', 'missing'], new Map(), codec)).toEqual({ h: parts.h });
  });

  it('move each part’s long strings into blobs of that part, and bring them back', () => {
    const long = 'x'.repeat(BLOB_THRESHOLD + 1);
    const encoded = encodeParts({ s: { text: long }, q: { text: 'short' }, c: { result: 'y'.repeat(2000) } }, { c: 1024 });
    expect([...encoded.blobs.s!.values()]).toEqual([long]);
    expect(encoded.blobs.q!.size).toBe(0);
    expect(encoded.blobs.c!.size).toBe(1);
    const blobs = new Map([...encoded.blobs.s!, ...encoded.blobs.c!]);
    expect(decodeParts(encoded.bytes, ['s', 'q', 'c'], blobs, 'dict1')).toEqual({ s: { text: long }, q: { text: 'short' }, c: { result: 'y'.repeat(2000) } });
  });

  it('are a good deal smaller with the dictionary than with brotli alone', () => {
    let dictionary = 0;
    let brotli = 0;
    for (let n = 1; n <= 20; n++) {
      dictionary += encodeParts(turnParts(n), {}, 'dict1').bytes.length;
      brotli += encodeParts(turnParts(n), {}, 'brotli').bytes.length;
    }
    console.log(`20 turn records' parts: ${dictionary} B with the record dictionary, ${brotli} B with brotli (quality 5)`);
    expect(dictionary).toBeLessThan(brotli * 0.8);
  });
});
