// bench/lib/binary-pages.ts: the resident pages of a process's `node` binary by ELF section, read
// here for this very process (root can read its own pagemap; vitest runs as root here).
import { readFileSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { binaryPages, elfLayout } from '../../bench/lib/binary-pages.ts';

/** Rss of the mappings of this process's executable, from smaps (MiB). */
function exeRssMiB(): number {
  const exe = readlinkSync('/proc/self/exe');
  let inExe = false;
  let kib = 0;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) { inExe = head[1] === exe; continue; }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (inExe && rss?.[1]) kib += Number(rss[1]);
  }
  return kib / 1024;
}

describe('binaryPages', () => {
  it("finds node's sections and its ICU data inside .rodata", () => {
    const { sections, icu } = elfLayout(process.execPath);
    const text = sections.find((s) => s.name === '.text');
    const rodata = sections.find((s) => s.name === '.rodata');
    expect(text?.size).toBeGreaterThan(1 << 20);
    expect(rodata).toBeDefined();
    // Node.js built with its full ICU (process.versions.icu) holds the data as the symbol icudtNN_dat.
    expect(process.versions.icu).toBeDefined();
    expect(icu).toBeDefined();
    expect(icu?.offset).toBeGreaterThanOrEqual(rodata?.offset ?? Infinity);
    expect((icu?.offset ?? 0) + (icu?.size ?? 0)).toBeLessThanOrEqual((rodata?.offset ?? 0) + (rodata?.size ?? 0));
  });

  it("adds up to the executable's resident pages, machine code first, and sees ICU data once Intl is used", () => {
    new Intl.DateTimeFormat('de-DE', { dateStyle: 'full' }).format(0);
    const p = binaryPages(process.pid);
    const sum = p.text + p.rodata + p.icu + p.symbols + p.other;
    // The process's own page table against the kernel's count for the same mappings (a page may be
    // resident through another process and not mapped in this one, never the other way round).
    expect(sum).toBeGreaterThan(10);
    expect(sum).toBeLessThanOrEqual(exeRssMiB() + 0.5);
    expect(p.text).toBeGreaterThan(p.rodata);
    expect(p.icu).toBeGreaterThan(0);
  });

  it('refuses a file that is not an ELF executable', () => {
    expect(() => elfLayout('/proc/self/status')).toThrow(/not a 64-bit little-endian ELF file/);
  });
});
