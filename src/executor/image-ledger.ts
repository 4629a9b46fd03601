// Where the image cleaner remembers which images shoal itself pulled, so that it survives a
// restart of shoal: an image pulled before a restart is still shoal's to remove afterwards, and
// an image the operator loaded by hand never becomes shoal's. A small JSON file in the node's data
// directory, or memory (tests, the memory runtime).
//
// Losing the file is safe: shoal forgets what it pulled and then removes nothing it had pulled
// before (the images stay until removed by hand). So it is written to a temporary name and
// renamed, without fsync: a crash loses at most the latest pulls, never the whole file.

import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { z } from 'zod';

export interface PulledImage {
  /** The reference as the service spec names it (what ensureImage was given). */
  ref: string;
  /** The image id the reference named once pulled; null until the cleaner has listed it. */
  imageId: string | null;
  /** Wall-clock ms of the pull. */
  pulledAt: number;
}

export interface ImageLedger {
  load(): PulledImage[];
  save(images: readonly PulledImage[]): void;
}

/** The ledger's problems go to the log; it never fails the caller. */
export type LedgerWarn = (message: string) => void;

const pulledImageSchema = z.object({ ref: z.string().min(1), imageId: z.string().min(1).nullable(), pulledAt: z.number().int().min(0) }).strict();
const fileSchema = z.object({ version: z.literal(1), images: z.array(pulledImageSchema) }).strict();

export class MemoryImageLedger implements ImageLedger {
  private images: PulledImage[] = [];

  load(): PulledImage[] {
    return this.images.map((i) => ({ ...i }));
  }

  save(images: readonly PulledImage[]): void {
    this.images = images.map((i) => ({ ...i }));
  }
}

export class FileImageLedger implements ImageLedger {
  constructor(private readonly file: string, private readonly warn: LedgerWarn) {}

  load(): PulledImage[] {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.warn(`image cleaner: cannot read ${this.file} (${(err as Error).message}); images pulled before are no longer removed`);
      return [];
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      raw = undefined;
    }
    const parsed = fileSchema.safeParse(raw);
    if (!parsed.success) {
      this.warn(`image cleaner: ${this.file} is not a list of pulled images; starting afresh (images pulled before are no longer removed)`);
      return [];
    }
    return parsed.data.images;
  }

  save(images: readonly PulledImage[]): void {
    const tmp = `${this.file}.tmp`;
    try {
      writeFileSync(tmp, `${JSON.stringify({ version: 1, images }, null, 2)}\n`);
      renameSync(tmp, this.file);
    } catch (err) {
      this.warn(`image cleaner: cannot write ${this.file}: ${(err as Error).message}`);
    }
  }
}
