// Scheduled snapshot files: written whole, named by cluster, index and time, pruned to `keep`,
// skipped when nothing was applied, a failure logged and not thrown; and `shoal snapshot ls` and
// `inspect` read them back.

import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { DocumentStore } from '../../fsm/index.ts';
import { backupFileName, listBackups, ScheduledBackups } from '../../src/node/recovery/backups.ts';
import { parseConfig } from '../../src/server/config.ts';
import { encodeSnapshotFileParts } from '../../src/node/recovery/snapshot-file.ts';
import { inProcess } from '../cli/in-process.ts';

const pause = (): Promise<void> => Promise.resolve();


/** take(): the snapshot file of an empty store at `index`. */
function source(): { take: (index: number) => Promise<{ index: number; parts: Uint8Array[] }> } {
  const store = new DocumentStore();
  return {
    take: async (index) => ({
      index,
      parts: await encodeSnapshotFileParts({ clusterId: 'c1', index, term: 2, members: [{ id: 'a1', name: 'n1', apiAddress: '127.0.0.1:1', peerAddress: '127.0.0.1:2' }] }, await store.snapshotInSlices(pause), pause),
    }),
  };
}

const log = { debug: () => undefined, info: () => undefined, warn: vi.fn(), error: () => undefined };

describe('scheduled snapshot files', () => {
  it('writes whole files named by cluster, index and time, keeps the newest, and skips an unchanged index', async () => {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-backups-')), 'backups');
    const { take } = source();
    let index = 10;
    let clock = Date.UTC(2026, 11, 1, 12, 0, 0);
    const b = new ScheduledBackups({ dir, intervalMs: 60_000, keep: 3, clusterId: 'c1', take: () => take(index), log, now: () => new Date(clock) });
    const first = await b.runOnce();
    expect(path.basename(first ?? '')).toBe('shoal-c1-000000000010-20261201T120000Z.snap');
    expect(await b.runOnce()).toBeUndefined();
    for (let i = 0; i < 4; i++) {
      index += 5;
      clock += 60_000;
      expect(await b.runOnce()).toBeDefined();
    }
    expect(listBackups(dir)).toEqual(['shoal-c1-000000000020-20261201T120200Z.snap', 'shoal-c1-000000000025-20261201T120300Z.snap', 'shoal-c1-000000000030-20261201T120400Z.snap']);
    expect(backupFileName('c1', 7, new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678)))).toBe('shoal-c1-000000000007-20260102T030405Z.snap');
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);

    const ls = await inProcess('snapshot', 'ls', '--dir', dir, '--json');
    expect(ls.code).toBe(0);
    expect((JSON.parse(ls.stdout) as { index: number; clusterId: string; time: string }[]).map((r) => [r.clusterId, r.index, r.time]))
      .toEqual([['c1', 20, '2026-12-01T12:02:00Z'], ['c1', 25, '2026-12-01T12:03:00Z'], ['c1', 30, '2026-12-01T12:04:00Z']]);
    const inspect = await inProcess('snapshot', 'inspect', path.join(dir, listBackups(dir)[2] ?? ''), '--json');
    expect(inspect.code).toBe(0);
    expect(JSON.parse(inspect.stdout)).toMatchObject({ clusterId: 'c1', index: 30, term: 2, documents: 0, members: [{ name: 'n1' }] });
  });

  it('logs a failed write and goes on; inspect refuses a damaged file with exit 1', async () => {
    const base = mkdtempSync(path.join(os.tmpdir(), 'shoal-backups-'));
    // A file where the directory should be: the write fails.
    writeFileSync(path.join(base, 'blocked'), 'x');
    const { take } = source();
    const b = new ScheduledBackups({ dir: path.join(base, 'blocked'), intervalMs: 60_000, keep: 3, clusterId: 'c1', take: () => take(1), log });
    expect(await b.runOnce()).toBeUndefined();
    expect(log.warn).toHaveBeenCalledWith(expect.stringContaining('scheduled snapshot to'));
    const bad = path.join(base, 'bad.snap');
    writeFileSync(bad, 'SHOALBAK\u0000\u0000\u0000\u0000garbage');
    const r = await inProcess('snapshot', 'inspect', bad);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('damaged');
  });

  it('finds a node\'s files through its config, and the config refuses an interval under a minute', async () => {
    const data = mkdtempSync(path.join(os.tmpdir(), 'shoal-backups-data-'));
    writeFileSync(path.join(data, 'shoal.yaml'), stringify({ dataDir: '.', api: { listen: '127.0.0.1:7100' }, peer: { listen: '127.0.0.1:7200' }, snapshot: { intervalMs: 3_600_000, dir: 'snaps' } }));
    const { take } = source();
    await new ScheduledBackups({ dir: path.join(data, 'snaps'), intervalMs: 3_600_000, keep: 2, clusterId: 'c9', take: () => take(4), log }).runOnce();
    const ls = await inProcess('snapshot', 'ls', '--data', data);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain('shoal-c9-000000000004-');
    expect((await inProcess('snapshot', 'ls')).code).toBe(2);
    expect(() => parseConfig({ dataDir: '.', api: { listen: '127.0.0.1:1' }, peer: { listen: '127.0.0.1:2' }, snapshot: { intervalMs: 1000 } }, 'x')).toThrow(/snapshot\.intervalMs: must be 0 \(off\) or at least 60000/);
  });
});
