import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeSnapshotData, encodeSnapshotData, encodeSnapshotDataInSlices } from '../../src/node/snapshot-data.ts';

const packr = new Packr({ useRecords: false });
const members = [{ id: 'a1', name: 'n1', peerAddress: '127.0.0.1:7201', apiAddress: '127.0.0.1:7101' }];
const state = { members, featureLevel: 1, removed: [] };

describe('snapshot data', () => {
  it.each([0, 1, 255, 256, 65_535, 65_536, 300_000])('writes the bytes of packr.pack({members, app}) for an app of %i bytes, from parts', (size) => {
    const app = Uint8Array.from({ length: size }, (_, i) => (i * 31) & 0xff);
    const cut = Math.floor(size / 3);
    const built = encodeSnapshotData(state, [app.subarray(0, cut), app.subarray(cut, 2 * cut), app.subarray(2 * cut)]);
    expect(Buffer.from(built).equals(Buffer.from(packr.pack({ members, app })))).toBe(true);
    const back = decodeSnapshotData(built);
    expect(back.members).toEqual(members);
    expect(Buffer.from(back.app).equals(Buffer.from(app))).toBe(true);
  });

  it.each([0, 1, 255, 65_536, 300_000])('copies the same bytes in slices, pausing between them, for an app of %i bytes', async (size) => {
    const app = Uint8Array.from({ length: size }, (_, i) => (i * 31) & 0xff);
    const cut = Math.floor(size / 3);
    const parts = [app.subarray(0, cut), app.subarray(cut, 2 * cut), app.subarray(2 * cut)];
    let pauses = 0;
    const sliced = await encodeSnapshotDataInSlices(state, parts, async () => { pauses++; }, 4096);
    const whole = encodeSnapshotData(state, parts);
    expect(Buffer.from(sliced).equals(Buffer.from(whole))).toBe(true);
    expect(pauses).toBe(Math.floor(whole.length / 4096));
  });

  it('writes a level-1 snapshot with nothing removed byte for byte as the first release did, and reads it back as level 1', () => {
    const app = Uint8Array.of(1, 2, 3);
    const built = encodeSnapshotData(state, [app]);
    expect(Buffer.from(built).equals(Buffer.from(packr.pack({ members, app })))).toBe(true);
    expect(decodeSnapshotData(built)).toMatchObject({ featureLevel: 1, removed: [] });
  });

  it('carries the feature level and the removed ids once either is set', () => {
    const app = Uint8Array.of(9);
    const back = decodeSnapshotData(encodeSnapshotData({ members, featureLevel: 2, removed: ['x1', 'y2'] }, [app]));
    expect(back).toMatchObject({ members, featureLevel: 2, removed: ['x1', 'y2'] });
    expect(Buffer.from(back.app).equals(Buffer.from(app))).toBe(true);
  });

  it('refuses malformed snapshot data with storage_corrupt, never a TypeError later', () => {
    for (const bad of [Uint8Array.of(0xc1), packr.pack({ members: 'x', app: new Uint8Array(0) }), packr.pack([1, 2]), packr.pack({ members })]) {
      expect(() => decodeSnapshotData(bad)).toThrow(expect.objectContaining({ code: 'storage_corrupt' }));
    }
  });
});
