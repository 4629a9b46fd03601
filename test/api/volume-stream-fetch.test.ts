// fetchVolumeStream, the backup's side of GET /v1/volumes/NAME/versions/VERSION/stream: the
// holder's answer passed on as it arrives, never whole: a stream longer than announced refused as
// soon as it is, one shorter or with another digest refused at its end (so the backup fails before
// its manifest), one announced larger than the backup takes refused unread.

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fetchVolumeStream, streamHeader } from '../../src/api/volume-routes.ts';
import type { PeerHttp } from '../../src/api/peer-http.ts';

const version = { seq: 5, node: 'n2', epoch: 2 };

function holder(body: Buffer, announced: { bytes: number; sha256: string; parent?: string | null }, pieceBytes = 1000): { peer: PeerHttp; pulled: () => number; paths: string[] } {
  let pulled = 0;
  const paths: string[] = [];
  const peer = {
    fetch: async (_addr: string, p: string): Promise<Response> => {
      paths.push(p);
      let at = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull: (c) => {
          if (at >= body.length) return c.close();
          c.enqueue(body.subarray(at, at + pieceBytes));
          at += pieceBytes;
          pulled = at;
        },
      });
      return new Response(stream, { headers: { [streamHeader]: Buffer.from(JSON.stringify(announced)).toString('base64url') } });
    },
  } as unknown as PeerHttp;
  return { peer, pulled: () => pulled, paths };
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function drain(it: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of it) n += c.length;
  return n;
}

describe('fetchVolumeStream', () => {
  const body = Buffer.alloc(100_000, 7);

  it('passes the stream on as it arrives, checked at its end', async () => {
    const h = holder(body, { bytes: body.length, sha256: sha(body) });
    const it = (await fetchVolumeStream(h.peer, 'a:1', 'data', version, 1 << 20)).body;
    const first = await it[Symbol.asyncIterator]().next();
    expect(first.value?.length).toBe(1000);
    // Only what was asked for came in (plus what the stream reads ahead), not the whole body.
    expect(h.pulled()).toBeLessThan(body.length);
    expect(await drain((await fetchVolumeStream(holder(body, { bytes: body.length, sha256: sha(body) }).peer, 'a:1', 'data', version, 1 << 20)).body)).toBe(body.length);
  });

  it('refuses a stream shorter, longer or other than announced, and one larger than the backup takes', async () => {
    const other = Buffer.from(body);
    other[500] = 8;
    await expect(drain((await fetchVolumeStream(holder(other, { bytes: body.length, sha256: sha(body) }).peer, 'a:1', 'data', version, 1 << 20)).body)).rejects.toMatchObject({ code: 'backup_failed', message: expect.stringMatching(/arrived damaged/) });
    await expect(drain((await fetchVolumeStream(holder(body.subarray(0, 50_000), { bytes: body.length, sha256: sha(body) }).peer, 'a:1', 'data', version, 1 << 20)).body)).rejects.toThrow(/arrived damaged: 50000 bytes/);
    await expect(drain((await fetchVolumeStream(holder(body, { bytes: 50_000, sha256: sha(body) }).peer, 'a:1', 'data', version, 1 << 20)).body)).rejects.toThrow(/longer than the 50000 bytes announced/);
    await expect(fetchVolumeStream(holder(body, { bytes: body.length, sha256: sha(body) }).peer, 'a:1', 'data', version, 1000)).rejects.toThrow(/more than the 1000 a backup takes/);
  });

  it('asks for an increment with ?parent and says what the holder answered: the increment, or whole', async () => {
    const parent = { seq: 4, node: 'n2', epoch: 2 };
    const inc = holder(body, { bytes: body.length, sha256: sha(body), parent: 's4-e2-n2' });
    const a = await fetchVolumeStream(inc.peer, 'a:1', 'data', version, 1 << 20, parent);
    expect(inc.paths).toEqual(['/v1/volumes/data/versions/s5-e2-n2/stream?parent=s4-e2-n2']);
    expect(a.parent).toEqual(parent);
    expect(await drain(a.body)).toBe(body.length);
    // The holder no longer has s4: a whole stream, parent null.
    expect((await fetchVolumeStream(holder(body, { bytes: body.length, sha256: sha(body), parent: null }).peer, 'a:1', 'data', version, 1 << 20, parent)).parent).toBeNull();
    // Without a parent asked, the request has no query and the answer is whole.
    const whole = holder(body, { bytes: body.length, sha256: sha(body) });
    expect((await fetchVolumeStream(whole.peer, 'a:1', 'data', version, 1 << 20)).parent).toBeNull();
    expect(whole.paths).toEqual(['/v1/volumes/data/versions/s5-e2-n2/stream']);
    // An increment on a version not asked for is refused.
    await expect(fetchVolumeStream(holder(body, { bytes: body.length, sha256: sha(body), parent: 's3-e2-n2' }).peer, 'a:1', 'data', version, 1 << 20, parent)).rejects.toThrow(/not asked for/);
  });
});
