/**
 * Removes secret values from what a component returns, before it reaches state, events, blobs
 * or logs: a server that echoes a request header back must leak nothing. Each value is
 * replaced in the forms an echo is likely to take: raw, JSON-escaped, URL-encoded (as
 * encodeURIComponent and as a form, either hex case), hex, and base64 / base64url (alone, and
 * embedded in a longer base64 text, e.g. `Basic` credentials, at any of the three alignments).
 *
 * @example
 *   redactSecrets({ echoed: 'Bearer s3cr3t-token' }, ['s3cr3t-token']); // { echoed: 'Bearer [redacted]' }
 */

export const REDACTED = '[redacted]';
/** Derived forms shorter than this are not redacted (they would match unrelated text). */
const MIN_FORM_LENGTH = 6;

/** Every form of the values to remove, longest first. */
export function secretForms(values: Iterable<string>): string[] {
  const forms = new Set<string>();
  for (const value of values) {
    if (value === '') continue;
    forms.add(value);
    if (value.length < 4) continue;
    const bytes = Buffer.from(value, 'utf8');
    const derived = [
      JSON.stringify(value).slice(1, -1),
      encodeURIComponent(value),
      new URLSearchParams({ v: value }).toString().slice(2),
      bytes.toString('hex'),
      bytes.toString('hex').toUpperCase(),
      bytes.toString('base64'),
      bytes.toString('base64url'),
      ...alignedBase64(bytes),
    ];
    for (const form of derived) {
      if (form.length < MIN_FORM_LENGTH) continue;
      forms.add(form);
      // percent escapes in lower case too (%2f as well as %2F)
      if (form.includes('%')) forms.add(form.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()));
    }
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** Replaces every form of every value in every string of `value` (objects and lists included). */
export function redactSecrets<T>(value: T, values: Iterable<string>): T {
  const forms = secretForms(values);
  if (forms.length === 0) return value;
  return redactWith(value, forms) as T;
}

function redactWith(value: unknown, forms: readonly string[]): unknown {
  if (typeof value === 'string') {
    let text = value;
    for (const form of forms) if (text.includes(form)) text = text.split(form).join(REDACTED);
    return text;
  }
  if (Array.isArray(value)) return value.map((v) => redactWith(v, forms));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redactWith(k, forms) as string, redactWith(v, forms)]));
  }
  return value;
}

/**
 * The part of base64 text that encodes exactly these bytes when they sit after 0, 1 or 2 other
 * bytes (the characters that mix in neighbouring bytes are left out), padding-free, in the
 * standard and the URL alphabet.
 */
function alignedBase64(bytes: Buffer): string[] {
  const out: string[] = [];
  for (const offset of [0, 1, 2]) {
    const text = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const whole = Math.floor((offset + bytes.length) / 3) * 4;
    const skip = offset === 0 ? 0 : offset + 1;
    const core = text.slice(skip, whole);
    if (core.length < 8) continue;
    out.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return out;
}
