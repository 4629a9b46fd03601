// Which code a process loaded: the module URLs bench/lib/footprint-hooks.mjs recorded, mapped
// through esbuild's metafile of the bundle to the sources each loaded output file holds, and
// counted by npm package and by folder of src/.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The part of esbuild's metafile read here. */
export interface Metafile {
  outputs: Record<string, { bytes: number; inputs: Record<string, { bytesInOutput: number }> }>;
}

export interface LoadGroup {
  what: string;
  files: number;
  bytes: number;
}

export interface LoadBreakdown {
  /** Output files of the bundle loaded, of all it has. */
  outputsLoaded: number;
  outputsTotal: number;
  /** Bytes of the bundle loaded, of all it has (JavaScript, as bundled: not minified). */
  bundleBytesLoaded: number;
  bundleBytesTotal: number;
  /** Node's own modules imported through the ESM loader (node:...), and files outside the bundle (native packages). */
  builtins: number;
  external: { files: number; bytes: number };
  /** Sources inside the loaded outputs, by package or src/ folder, largest first. */
  groups: LoadGroup[];
}

/** The package (node_modules/NAME or @scope/NAME) or source folder (src/api, fsm...) a source path belongs to. */
export function groupOfSource(input: string): string {
  const nm = input.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = input.slice(nm + 'node_modules/'.length).split('/');
    return `npm ${parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  const parts = input.split('/');
  if (parts[0] === 'src') return parts.length > 2 ? `src/${parts[1]}` : 'src (top)';
  return parts[0] ?? input;
}

/**
 * `loadsFile`: lines "URL<TAB>bytes"; `metafile`: the bundle's, whose output paths are relative
 * to `cwd` (where esbuild ran).
 */
export function breakdown(loadsFile: string, metafile: Metafile, cwd: string): LoadBreakdown {
  const urls = [...new Set(readFileSync(loadsFile, 'utf8').split('\n').filter((l) => l !== ''))].map((l) => {
    const [url = '', bytes = '0'] = l.split('\t');
    return { url, bytes: Number(bytes) };
  });
  const outputs = new Map(Object.entries(metafile.outputs).filter(([o]) => o.endsWith('.mjs')).map(([o, v]) => [path.resolve(cwd, o), v]));
  const groups = new Map<string, LoadGroup>();
  const loaded = new Set<string>();
  let builtins = 0;
  const external = { files: 0, bytes: 0 };
  for (const { url, bytes } of urls) {
    if (url.startsWith('node:')) { builtins++; continue; }
    const file = url.startsWith('file:') ? fileURLToPath(url) : url;
    const out = outputs.get(file);
    if (out === undefined) { external.files++; external.bytes += bytes; continue; }
    loaded.add(file);
    for (const [input, { bytesInOutput }] of Object.entries(out.inputs)) {
      if (bytesInOutput === 0) continue;
      const key = groupOfSource(input);
      const g = groups.get(key) ?? { what: key, files: 0, bytes: 0 };
      g.files++;
      g.bytes += bytesInOutput;
      groups.set(key, g);
    }
  }
  const sumBytes = (xs: Iterable<{ bytes: number }>): number => [...xs].reduce((a, b) => a + b.bytes, 0);
  return {
    outputsLoaded: loaded.size, outputsTotal: outputs.size,
    bundleBytesLoaded: sumBytes([...loaded].map((f) => outputs.get(f) ?? { bytes: 0 })), bundleBytesTotal: sumBytes(outputs.values()),
    builtins, external, groups: [...groups.values()].sort((a, b) => b.bytes - a.bytes),
  };
}
