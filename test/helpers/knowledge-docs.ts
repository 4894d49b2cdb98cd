/**
 * Documents for knowledge base tests: a Markdown guide and a text FAQ that parse, a PDF that
 * does not, and a multipart body of `file` parts as clients upload them.
 */
import { randomBytes } from 'node:crypto';

export const GUIDE_MD = [
  '# Espresso machine guide',
  '',
  '## Warranty',
  'The espresso machine carries a warranty of two years from the date of purchase.',
  '',
  '## Descaling',
  'Descale the boiler every month with citric acid so the pump keeps its pressure.',
].join('\n');
export const FAQ_TXT = 'Refunds are paid within fourteen days of a return.\nThe grinder has a separate warranty of one year.';
/** A PDF header and nothing a PDF parser can read. */
export const BROKEN_PDF = '%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without an xref table\n%%EOF';

export interface Part {
  name: string;
  content: string | Buffer;
  type?: string;
}

/** A multipart body of `file` parts. */
export function multipart(parts: readonly Part[]): { body: Buffer; type: string } {
  const boundary = `kb${randomBytes(12).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${p.name}"\r\nContent-Type: ${p.type ?? 'application/octet-stream'}\r\n\r\n`));
    chunks.push(Buffer.isBuffer(p.content) ? p.content : Buffer.from(p.content, 'latin1'));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}
