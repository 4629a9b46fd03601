// Types of scripts/bundle.mjs for the TypeScript that imports it (tests, bench/ab.ts).
export function bundle(outdir: string): Promise<void>;
export function bundleConsole(outdir: string): Promise<void>;
