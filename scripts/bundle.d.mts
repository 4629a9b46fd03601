// Types of scripts/bundle.mjs for the TypeScript that imports it (tests, bench/ab.ts).
/** The part of esbuild's metafile bench/footprint.ts reads: what went into each output file. */
export interface BundleMetafile {
  inputs: Record<string, { bytes: number; imports: { path: string; kind: string }[] }>;
  outputs: Record<string, { bytes: number; imports: { path: string; kind: string; external?: boolean }[]; inputs: Record<string, { bytesInOutput: number }> }>;
}
/** `entry`, `entryName`: another entry point bundled as the CLI is (default src/cli/main.ts as shoal.mjs, and serve.cjs beside it). */
interface BundleEntry { entry?: string; entryName?: string }
export function bundle(outdir: string, options?: { metafile?: false } & BundleEntry): Promise<undefined>;
export function bundle(outdir: string, options: { metafile: true } & BundleEntry): Promise<BundleMetafile>;
export function bundleConsole(outdir: string): Promise<void>;
/** OUTDIR/run.mjs: runs the build in OUTDIR as bin/shoal.js runs dist/ (serve from serve.cjs with its code cache). */
export function writeRunner(outdir: string): void;
