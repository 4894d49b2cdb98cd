import { isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { type AddressClass, cidrContains, classifyIp, embeddedIpv4, formatIp, parseCidr, parseIp } from '../../lib/outbound';

describe('parseIp', () => {
  it.each([
    ['0.0.0.0', [0, 0, 0, 0]],
    ['127.0.0.1', [127, 0, 0, 1]],
    ['255.255.255.255', [255, 255, 255, 255]],
  ])('reads IPv4 %s', (text, bytes) => {
    expect(parseIp(text)).toEqual({ family: 4, bytes: Uint8Array.from(bytes) });
  });

  it.each([
    ['::', '::'],
    ['::1', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['[::1]', '::1'],
    ['FE80::1%eth0', 'fe80::1'],
    ['2001:DB8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2606:4700::1', '2606:4700::1'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['0:0:0:0:0:ffff:7f00:0001', '::ffff:7f00:1'],
    ['64:ff9b::10.0.0.1', '64:ff9b::a00:1'],
  ])('reads IPv6 %s (canonical %s)', (text, canonical) => {
    const ip = parseIp(text);
    expect(ip?.family).toBe(6);
    expect(formatIp(ip!)).toBe(canonical);
  });

  it.each([
    '',
    'localhost',
    '1.2.3',
    '1.2.3.4.5',
    '256.0.0.1',
    '01.2.3.4',
    '0x7f.0.0.1',
    '2130706433',
    '1.2.3.-4',
    ':::',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8::',
    '12345::1',
    'g::1',
    '::1.2.3',
    '1.2.3.4::',
    '::ffff:1.2.3.4:5',
  ])('rejects %j', (text) => {
    expect(parseIp(text)).toBeNull();
  });

  it('agrees with node:net isIP on a sample of valid and invalid text', () => {
    const samples = ['1.1.1.1', '::ffff:1.1.1.1', '::', 'fe80::', '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:7:1.2.3.4', 'abc', '1.1.1.01', '::1::'];
    for (const s of samples) expect(parseIp(s) !== null, s).toBe(isIP(s) !== 0);
  });
});

describe('classifyIp', () => {
  const refused: [AddressClass, string[]][] = [
    ['unspecified', ['0.0.0.0', '0.1.2.3', '0.255.255.255', '::', '0:0:0:0:0:0:0:0', '::ffff:0.0.0.0', '::ffff:0:0']],
    ['loopback', ['127.0.0.1', '127.1.2.3', '127.255.255.255', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1', '::127.0.0.1', '::7f00:1', '64:ff9b::127.0.0.1', '2002:7f00:1::', '2002:7f00:0001:1234::1']],
    ['private', ['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.0.1', '192.168.255.255', '::ffff:10.1.2.3', '::ffff:a01:203', '::ffff:172.16.0.1', '::ffff:c0a8:101', '64:ff9b::192.168.1.1', '64:ff9b::a00:1', '2002:c0a8:0101::1', '::10.0.0.1']],
    ['shared', ['100.64.0.1', '100.127.255.255', '::ffff:100.64.0.1', '64:ff9b::6440:1']],
    ['link-local', ['169.254.0.1', '169.254.169.254', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', '64:ff9b::169.254.169.254', '2002:a9fe:a9fe::', 'fe80::1', 'febf:ffff::1', 'fe80::1%eth0']],
    ['unique-local', ['fc00::1', 'fd00::1', 'fd00:ec2::254', 'FD00:EC2:0:0:0:0:0:254', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']],
    ['multicast', ['224.0.0.1', '239.255.255.250', '::ffff:224.0.0.1', 'ff02::1', 'ff05::1:3', 'ff00::']],
    ['reserved', ['240.0.0.1', '250.1.2.3', '255.255.255.255', '::ffff:255.255.255.255', '192.0.0.1', '192.0.0.170', '198.18.0.1', '198.19.255.255', '100::', '100::ffff:ffff:ffff:ffff', 'fec0::1', '64:ff9b:1::1', '4000::1']],
    ['documentation', ['192.0.2.1', '198.51.100.7', '203.0.113.255', '::ffff:192.0.2.1', '2001:db8::1', '2001:0db8:ffff::1', '2002:c000:0201::']],
  ];
  it.each(refused.flatMap(([cls, addresses]) => addresses.map((a) => [a, cls] as const)))('%s is %s', (address, cls) => {
    expect(classifyIp(address)).toBe(cls);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '11.0.0.1',
    '172.15.255.255',
    '172.32.0.0',
    '192.167.255.255',
    '192.169.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '169.253.255.255',
    '169.255.0.0',
    '223.255.255.255',
    '198.17.255.255',
    '198.20.0.0',
    '192.0.1.255',
    '2606:4700::1',
    '2001:4860:4860::8888',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
    '64:ff9b::8.8.8.8',
    '2002:0808:0808::1',
    '::8.8.8.8',
  ])('%s is public', (address) => {
    expect(classifyIp(address)).toBeNull();
  });

  it('refuses to classify text that is not an address', () => {
    expect(() => classifyIp('localhost')).toThrow(TypeError);
  });
});

describe('embeddedIpv4', () => {
  it.each([
    ['::ffff:1.2.3.4', '1.2.3.4'],
    ['::1.2.3.4', '1.2.3.4'],
    ['::ffff:0:1.2.3.4', '1.2.3.4'],
    ['64:ff9b::1.2.3.4', '1.2.3.4'],
    ['2002:102:304::', '1.2.3.4'],
  ])('%s embeds %s', (v6, v4) => {
    const embedded = embeddedIpv4(parseIp(v6)!);
    expect(embedded && formatIp(embedded)).toBe(v4);
  });

  it.each(['::', '::1', '2606:4700::1', '1.2.3.4'])('%s embeds nothing', (text) => {
    expect(embeddedIpv4(parseIp(text)!)).toBeNull();
  });
});

describe('CIDR', () => {
  it.each([
    ['127.0.0.0/8', '127.0.0.1', true],
    ['127.0.0.0/8', '127.255.255.255', true],
    ['127.0.0.0/8', '128.0.0.1', false],
    ['127.0.0.0/8', '::ffff:127.0.0.1', true],
    ['10.1.2.3/8', '10.200.0.1', true],
    ['172.16.0.0/12', '172.31.0.1', true],
    ['172.16.0.0/12', '172.32.0.1', false],
    ['0.0.0.0/0', '8.8.8.8', true],
    ['0.0.0.0/0', '::1', false],
    ['1.2.3.4', '1.2.3.4', true],
    ['1.2.3.4/32', '1.2.3.5', false],
    ['fd00::/8', 'fd00:ec2::254', true],
    ['fd00::/8', 'fc00::1', false],
    ['::1', '::1', true],
    ['::1/128', '::2', false],
    ['::/0', '2606:4700::1', true],
    ['::/0', '1.2.3.4', false],
    ['2001:db8::/33', '2001:db8:7fff::1', true],
    ['2001:db8::/33', '2001:db8:8000::1', false],
  ])('%s contains %s: %s', (network, address, expected) => {
    expect(cidrContains(parseCidr(network)!, parseIp(address)!)).toBe(expected);
  });

  it.each(['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/08', '10.0.0/8', 'localhost/8', '/8', '10.0.0.0/8/8', '10.0.0.0/ 8x'])(
    'rejects %j',
    (text) => {
      expect(parseCidr(text)).toBeNull();
    },
  );

  it('clears host bits', () => {
    const network = parseCidr('10.1.2.3/8')!;
    expect(formatIp(network)).toBe('10.0.0.0');
    expect(network.prefix).toBe(8);
  });
});
