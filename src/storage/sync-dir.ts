// fsync of a directory: makes a rename or a new file in it survive a power cut (the entry lives
// in the directory, not in the file). One helper for the log, the snapshot restore and recovery.

import fs from 'node:fs';
import { open } from 'node:fs/promises';

export function syncDirSync(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
