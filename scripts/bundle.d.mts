// Types of scripts/bundle.mjs for the TypeScript that imports it (tests, bench/ab.ts).
/** The part of esbuild's metafile bench/footprint.ts reads: what went into each output file. */
export interface BundleMetafile {
  inputs: Record<string, { bytes: number; imports: { path: string; kind: string }[] }>;
  outputs: Record<string, { bytes: number; imports: { path: string; kind: string; external?: boolean }[]; inputs: Record<string, { bytesInOutput: number }> }>;
}
export function bundle(outdir: string, options?: { metafile?: false }): Promise<undefined>;
export function bundle(outdir: string, options: { metafile: true }): Promise<BundleMetafile>;
export function bundleConsole(outdir: string): Promise<void>;
