// Preloaded (`node --import`) into the processes bench/footprint.ts measures; inert unless
// SHOAL_FOOTPRINT_DIR is set. It adds no timer and no handle that keeps a process alive:
// - SIGUSR2 writes DIR/PID.json (through a rename: a reader never sees half of it):
//   v8.getHeapStatistics(), the heap spaces and process.memoryUsage(), after a full collection
//   when the process runs with --expose-gc (the leak check's nodes only); then, when DIR/PID.snapshot-wanted exists, a heap snapshot
//   DIR/PID.heapsnapshot (after the figures: taking it collects garbage), then DIR/PID.snapshot-done.
// - at exit, DIR/PID.exit.json: the peak resident size (getrusage's maxRSS, KiB).
// - SHOAL_FOOTPRINT_LOADS=FILE registers footprint-hooks.mjs, which appends every module URL the
//   ESM loader loads to FILE (the hooks run on a thread of their own: a recording process is
//   not measured for memory).
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { register } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import v8 from 'node:v8';

const dir = process.env.SHOAL_FOOTPRINT_DIR;
const loads = process.env.SHOAL_FOOTPRINT_LOADS;
if (loads !== undefined && loads !== '') register('./footprint-hooks.mjs', import.meta.url, { data: { file: loads } });
if (dir !== undefined && dir !== '') {
  process.on('SIGUSR2', () => {
    const collected = typeof globalThis.gc === 'function';
    if (collected) globalThis.gc();
    const figures = { collected, heap: v8.getHeapStatistics(), spaces: v8.getHeapSpaceStatistics(), memory: process.memoryUsage() };
    const file = path.join(dir, `${process.pid}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(figures));
    renameSync(`${file}.tmp`, file);
    if (existsSync(path.join(dir, `${process.pid}.snapshot-wanted`))) {
      v8.writeHeapSnapshot(path.join(dir, `${process.pid}.heapsnapshot`));
      writeFileSync(path.join(dir, `${process.pid}.snapshot-done`), '');
    }
  });
  process.on('exit', () => {
    writeFileSync(path.join(dir, `${process.pid}.exit.json`), JSON.stringify({ maxRssKiB: process.resourceUsage().maxRSS }));
  });
}
