// Which parts of its executable a process holds resident (issue 45): the pages of the `node`
// binary that a process has touched, from /proc/PID/maps and /proc/PID/pagemap, grouped by the
// ELF section they fall in, with the ICU data (the `icudtNN_dat` symbol inside .rodata) apart.
// A bare Node.js process touches about 30 MiB of its 95 MiB binary; what a node touches beyond
// that is code and data of the runtime (TLS, the optimizing compiler, the JavaScript sources of
// Node's own modules, which the binary holds in .rodata), clean pages every Node.js process on
// the machine shares.

import { closeSync, openSync, readFileSync, readSync, readlinkSync } from 'node:fs';

const pageBytes = 4096;

interface Section { name: string; offset: number; size: number }

/** Resident MiB of the executable by group: `.text`, `.rodata` (without the ICU data), `ICU data`, `dynamic symbols`, `other`. */
export type BinaryPages = Record<'text' | 'rodata' | 'icu' | 'symbols' | 'other', number>;

function readAt(fd: number, offset: number, length: number): Buffer {
  const b = Buffer.alloc(length);
  readSync(fd, b, 0, length, offset);
  return b;
}

/** The sections of a 64-bit little-endian ELF file, and the file range of its ICU data (if any). */
export function elfLayout(file: string): { sections: Section[]; icu: { offset: number; size: number } | undefined } {
  const fd = openSync(file, 'r');
  try {
    const h = readAt(fd, 0, 64);
    if (h.readUInt32BE(0) !== 0x7f454c46 || h[4] !== 2 || h[5] !== 1) throw new Error(`${file}: not a 64-bit little-endian ELF file`);
    const shoff = Number(h.readBigUInt64LE(0x28));
    const shentsize = h.readUInt16LE(0x3a);
    const shnum = h.readUInt16LE(0x3c);
    const shstrndx = h.readUInt16LE(0x3e);
    const table = readAt(fd, shoff, shentsize * shnum);
    const raw = Array.from({ length: shnum }, (_, i) => {
      const at = i * shentsize;
      return {
        nameAt: table.readUInt32LE(at), type: table.readUInt32LE(at + 4), addr: Number(table.readBigUInt64LE(at + 0x10)),
        offset: Number(table.readBigUInt64LE(at + 0x18)), size: Number(table.readBigUInt64LE(at + 0x20)), link: table.readUInt32LE(at + 0x28),
      };
    });
    const strtab = raw[shstrndx];
    if (strtab === undefined) throw new Error(`${file}: no section name table`);
    const names = readAt(fd, strtab.offset, strtab.size);
    const nameOf = (at: number): string => names.toString('latin1', at, names.indexOf(0, at));
    const sections = raw.map((s) => ({ name: nameOf(s.nameAt), offset: s.offset, size: s.size }));
    // The ICU data: a symbol icudtNN_dat in the dynamic symbol table (SHT_DYNSYM = 11).
    let icu: { offset: number; size: number } | undefined;
    const dynsym = raw.find((s) => s.type === 11);
    const dynstr = dynsym !== undefined ? raw[dynsym.link] : undefined;
    if (dynsym !== undefined && dynstr !== undefined) {
      const syms = readAt(fd, dynsym.offset, dynsym.size);
      const strs = readAt(fd, dynstr.offset, dynstr.size);
      for (let at = 0; at + 24 <= syms.length; at += 24) {
        const nameAt = syms.readUInt32LE(at);
        const name = strs.toString('latin1', nameAt, strs.indexOf(0, nameAt));
        if (!/^icudt\d+_dat$/.test(name)) continue;
        const value = Number(syms.readBigUInt64LE(at + 8));
        const size = Number(syms.readBigUInt64LE(at + 16));
        const home = raw.find((s) => s.addr !== 0 && value >= s.addr && value < s.addr + s.size);
        if (home !== undefined) icu = { offset: value - home.addr + home.offset, size };
        break;
      }
    }
    return { sections, icu };
  } finally {
    closeSync(fd);
  }
}

function groupOf(name: string): keyof BinaryPages {
  if (name === '.text') return 'text';
  if (name === '.rodata') return 'rodata';
  if (['.dynsym', '.dynstr', '.gnu.hash', '.gnu.version', '.gnu.version_r', '.hash'].includes(name)) return 'symbols';
  return 'other';
}

/** The resident pages of process `pid`'s executable that this process mapped, by group (MiB). Needs root (pagemap). */
export function binaryPages(pid: number): BinaryPages {
  const exe = readlinkSync(`/proc/${pid}/exe`);
  const { sections, icu } = elfLayout(exe);
  const out: BinaryPages = { text: 0, rodata: 0, icu: 0, symbols: 0, other: 0 };
  const pagemap = openSync(`/proc/${pid}/pagemap`, 'r');
  try {
    for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(.*)$/.exec(line);
      if (!m || m[4] !== exe) continue;
      const start = Number.parseInt(m[1] ?? '0', 16);
      const end = Number.parseInt(m[2] ?? '0', 16);
      const fileOffset = Number.parseInt(m[3] ?? '0', 16);
      const pages = (end - start) / pageBytes;
      const entries = readAt(pagemap, (start / pageBytes) * 8, pages * 8);
      for (let p = 0; p < pages; p++) {
        // Bit 63: the page is present in this process's page table.
        if ((entries.readBigUInt64LE(p * 8) >> 63n) === 0n) continue;
        const fo = fileOffset + p * pageBytes;
        let group: keyof BinaryPages = 'other';
        if (icu !== undefined && fo >= icu.offset && fo < icu.offset + icu.size) group = 'icu';
        else {
          const s = sections.find((x) => x.size > 0 && fo >= x.offset && fo < x.offset + x.size);
          if (s !== undefined) group = groupOf(s.name);
        }
        out[group] += pageBytes / 2 ** 20;
      }
    }
  } finally {
    closeSync(pagemap);
  }
  return out;
}
