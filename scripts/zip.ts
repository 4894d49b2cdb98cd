/**
 * Writes a zip archive of deflated files, byte for byte the same for the same inputs (entries
 * sorted, timestamps fixed at 1980-01-01): what a Lambda package needs and no more (no zip64,
 * so under 4 GB, which Lambda's 250 MB limit is far below).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { crc32, deflateRawSync } from 'node:zlib';

/** One file: its path inside the archive and where its bytes come from. */
export type ZipInput = { path: string; file: string } | { path: string; data: Buffer };

/** Writes the archive; answers each entry's uncompressed size. */
export async function writeZip(target: string, inputs: readonly ZipInput[]): Promise<{ path: string; bytes: number }[]> {
  const sorted = [...inputs].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  const sizes: { path: string; bytes: number }[] = [];
  let offset = 0;
  for (const input of sorted) {
    if (sizes.some((s) => s.path === input.path)) throw new Error(`${input.path} is in the archive twice`);
    const data = 'data' in input ? input.data : await readFile(input.file);
    const compressed = deflateRawSync(data, { level: 9 });
    const name = Buffer.from(input.path.replaceAll('\\', '/'), 'utf8');
    const checksum = crc32(data);
    // version 2.0, flags: UTF-8 names, method 8 (deflate), time 00:00, date 1980-01-01
    const common = (header: Buffer, at: number) => {
      header.writeUInt16LE(20, at);
      header.writeUInt16LE(0x0800, at + 2);
      header.writeUInt16LE(8, at + 4);
      header.writeUInt16LE(0, at + 6);
      header.writeUInt16LE(0x21, at + 8);
      header.writeUInt32LE(checksum, at + 10);
      header.writeUInt32LE(compressed.length, at + 14);
      header.writeUInt32LE(data.length, at + 18);
      header.writeUInt16LE(name.length, at + 22);
      header.writeUInt16LE(0, at + 24);
    };
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    common(local, 4);
    const entry = Buffer.alloc(46);
    entry.writeUInt32LE(0x02014b50, 0);
    entry.writeUInt16LE(0x031e, 4); // made by: Unix, spec 3.0
    common(entry, 6);
    entry.writeUInt16LE(0, 32); // comment
    entry.writeUInt16LE(0, 34); // disk
    entry.writeUInt16LE(0, 36); // internal attributes
    entry.writeUInt32LE((0o100644 << 16) >>> 0, 38); // a regular file, rw-r--r--
    entry.writeUInt32LE(offset, 42);
    locals.push(local, name, compressed);
    central.push(entry, name);
    offset += local.length + name.length + compressed.length;
    sizes.push({ path: input.path, bytes: data.length });
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(sorted.length, 8);
  end.writeUInt16LE(sorted.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  await writeFile(target, Buffer.concat([...locals, directory, end]));
  return sizes;
}
