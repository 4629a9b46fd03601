// Types of scripts/layers.mjs, for the TypeScript tests that read it.
export declare const layers: Record<string, string[]>;
export declare function folderOf(rel: string): string | null;
