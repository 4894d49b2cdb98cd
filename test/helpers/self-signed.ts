/**
 * A self-signed TLS certificate made at run time with node:crypto (which signs but does not
 * build certificates): an ECDSA P-256 key and a minimal X.509 v3 certificate in DER, for the
 * names given as subjectAltName DNS entries. It is its own CA (basicConstraints CA:TRUE), so a
 * client trusts it with `ca: cert`. Valid from 2000 to 2099, so no test depends on the clock.
 *
 * @example
 *   const { key, cert } = selfSignedCertificate(['smtp.test']);
 *   tls.createServer({ key, cert }); // a client connects with { ca: cert, servername: 'smtp.test' }
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

export interface TestCertificate {
  /** PEM, PKCS#8. */
  key: string;
  /** PEM. */
  cert: string;
}

export function selfSignedCertificate(names: readonly string[]): TestCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaWithSha256 = sequence(oid('1.2.840.10045.4.3.2'));
  const name = sequence(set(sequence(oid('2.5.4.3'), tlv(0x0c, Buffer.from(names[0] ?? 'test', 'utf8')))));
  const serial = randomBytes(8);
  serial[0]! &= 0x7f; // a positive INTEGER
  const subjectAltName = sequence(...names.map((n) => tlv(0x82, Buffer.from(n, 'ascii'))));
  const extensions = sequence(
    sequence(oid('2.5.29.17'), tlv(0x04, subjectAltName)),
    sequence(oid('2.5.29.19'), tlv(0x01, Buffer.from([0xff])), tlv(0x04, sequence(tlv(0x01, Buffer.from([0xff]))))),
  );
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // v3
    tlv(0x02, serial),
    ecdsaWithSha256,
    name,
    sequence(tlv(0x17, Buffer.from('000101000000Z')), tlv(0x18, Buffer.from('20991231235959Z'))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, extensions),
  );
  const signature = sign('sha256', tbs, privateKey);
  const certificate = sequence(tbs, ecdsaWithSha256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  return { key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), cert: pem('CERTIFICATE', certificate) };
}

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const length = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), length, content]);
}

const sequence = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * a + b];
  for (const arc of rest) {
    const digits = [arc & 0x7f];
    for (let v = arc >> 7; v > 0; v >>= 7) digits.unshift((v & 0x7f) | 0x80);
    bytes.push(...digits);
  }
  return tlv(0x06, Buffer.from(bytes));
}

function pem(label: string, der: Buffer): string {
  const body = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}
