// A pull's progress summed from Docker's pull stream, as the agent reports it.

import { describe, expect, it } from 'vitest';
import { PullProgressTracker, pullProgressText } from '../../src/executor/pull-progress.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { flush } from './harness.ts';

/** The lines of a two-layer pull as Docker streams them (ids shortened as Docker does). */
const stream = [
  { status: 'Pulling from team/app', id: 'v1' },
  { status: 'Pulling fs layer', progressDetail: {}, id: 'a3ed95caeb02' },
  { status: 'Pulling fs layer', progressDetail: {}, id: '5e931329fda9' },
  { status: 'Downloading', progressDetail: { current: 1_000_000, total: 4_000_000 }, id: 'a3ed95caeb02' },
  { status: 'Downloading', progressDetail: { current: 2_500_000, total: 10_000_000 }, id: '5e931329fda9' },
  { status: 'Download complete', progressDetail: {}, id: 'a3ed95caeb02' },
  { status: 'Pull complete', progressDetail: {}, id: 'a3ed95caeb02' },
  { status: 'Downloading', progressDetail: { current: 10_000_000, total: 10_000_000 }, id: '5e931329fda9' },
  { status: 'Pull complete', progressDetail: {}, id: '5e931329fda9' },
  { status: 'Digest: sha256:5e931329fda90ca0cdcbefcff8517d1e84fb24f7393a75f2091316eb281f5779' },
  { status: 'Status: Downloaded newer image for 172.17.0.1:5000/team/app:v1' },
];

describe('PullProgressTracker', () => {
  it('counts layers and bytes as the stream goes, ignoring lines about no layer', () => {
    const t = new PullProgressTracker();
    const seen: string[] = [];
    for (const line of stream) if (t.add(line)) seen.push(pullProgressText('app:v1', t.progress));
    expect(seen).toEqual([
      'pulling app:v1: 0/1 layers',
      'pulling app:v1: 0/2 layers',
      'pulling app:v1: 0/2 layers, 1.0 MB of 4.0 MB',
      'pulling app:v1: 0/2 layers, 3.5 MB of 14.0 MB',
      'pulling app:v1: 1/2 layers, 6.5 MB of 14.0 MB',
      'pulling app:v1: 1/2 layers, 6.5 MB of 14.0 MB',
      'pulling app:v1: 1/2 layers, 14.0 MB of 14.0 MB',
      'pulling app:v1: 2/2 layers, 14.0 MB of 14.0 MB',
    ]);
    expect(t.progress).toEqual({ layers: 2, layersDone: 2, bytes: 14_000_000, bytesTotal: 14_000_000 });
  });

  it('says only the image before any layer is named', () => {
    expect(pullProgressText('app:v1', new PullProgressTracker().progress)).toBe('pulling app:v1');
  });

  it('the in-memory runtime reports a slow pull\'s progress, then its end', async () => {
    const clock = new ManualClock();
    const rt = new MemoryRuntime({ clock, pullable: ['slow:1'], pullDelayMs: 5_000 });
    const seen: string[] = [];
    const pull = rt.ensureImage('slow:1', 60_000, undefined, (p) => seen.push(pullProgressText('slow:1', p)));
    await flush();
    clock.advance(5_000);
    await flush();
    await pull;
    expect(seen).toEqual(['pulling slow:1: 0/1 layers, 5.0 MB of 10.0 MB', 'pulling slow:1: 1/1 layers, 10.0 MB of 10.0 MB']);
  });
});
