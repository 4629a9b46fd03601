// The parts of secrets at rest on their own (docs/security.md, "Secrets at rest"): a value sealed
// under a cluster key opens only with that key's private half and only under its own name; a
// re-wrap keeps the ciphertext; the unlock key seals and opens a voter's key files; the store's
// `compact` drops the retained events (at feature level 6 only, as an older release would refuse
// it); and a storage purge leaves no byte of what its snapshot covers in the log or the snapshots.

import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import {
  newClusterKey, openSecretValue, rewrapSecretValue, sealSecretValue, unwrapDataKey,
} from '../../src/resources/secret-crypto.ts';
import { ClusterKeyFiles } from '../../src/security/cluster-key-files.ts';
import { keyText, newUnlockKey, parseKeyText, unlockKeyPrefix } from '../../src/security/unlock-key.ts';
import { DiskStorage } from '../../src/storage/index.ts';
import type { Entry } from '../../src/raft/types.ts';
import { emptyConfState } from '../../src/raft/storage.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'shoal-secret-crypto-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('sealing a secret value', () => {
  const k1 = newClusterKey();
  const k2 = newClusterKey();
  const value = Buffer.from('correct horse battery staple');

  it('opens with the cluster key\'s data key, under its own name only, and holds no plain byte', () => {
    const sealed = sealSecretValue('db', value, k1);
    expect(JSON.stringify(sealed)).not.toContain(value.toString('base64'));
    expect(sealed.key.keyId).toBe(k1.id);
    const dataKey = unwrapDataKey(sealed.key, 'db', k1.privateKey);
    expect(openSecretValue('db', sealed, dataKey)).toEqual(value);
    // Copied under another name, or opened with another cluster key, it does not open.
    expect(() => unwrapDataKey(sealed.key, 'other', k1.privateKey)).toThrow();
    expect(() => openSecretValue('other', sealed, dataKey)).toThrow();
    expect(() => unwrapDataKey(sealed.key, 'db', k2.privateKey)).toThrow();
    // Each seal has its own data key.
    expect(sealSecretValue('db', value, k1).ciphertext).not.toBe(sealed.ciphertext);
  });

  it('refuses a changed ciphertext or tag', () => {
    const sealed = sealSecretValue('db', value, k1);
    const dataKey = unwrapDataKey(sealed.key, 'db', k1.privateKey);
    const flipped = Buffer.from(sealed.ciphertext, 'base64');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    expect(() => openSecretValue('db', { ...sealed, ciphertext: flipped.toString('base64') }, dataKey)).toThrow();
    expect(() => openSecretValue('db', { ...sealed, tag: Buffer.alloc(16).toString('base64') }, dataKey)).toThrow();
  });

  it('re-wraps the data key under another cluster key without changing the value\'s ciphertext', () => {
    const sealed = sealSecretValue('db', value, k1);
    const moved = rewrapSecretValue('db', sealed, k1.privateKey, k2);
    expect(moved.ciphertext).toBe(sealed.ciphertext);
    expect(moved.key.keyId).toBe(k2.id);
    expect(openSecretValue('db', moved, unwrapDataKey(moved.key, 'db', k2.privateKey))).toEqual(value);
    expect(() => unwrapDataKey(moved.key, 'db', k1.privateKey)).toThrow();
  });
});

describe('a voter\'s key files', () => {
  it('are 0600 in a 0700 directory; with an unlock key they are sealed and locked after a restart until unlocked', () => {
    const dir = path.join(tmp, 'keys');
    const key = newClusterKey();
    const files = new ClusterKeyFiles(dir);
    files.add(key.id, key.privateKey);
    const file = path.join(dir, 'tls', 'cluster-keys', `${key.id}.key`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(new ClusterKeyFiles(dir).privateKey(key.id)).toBeDefined();

    const unlock = newUnlockKey();
    files.reseal(unlock);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('"sealed"');
    const restarted = new ClusterKeyFiles(dir);
    expect(restarted.locked).toBe(true);
    expect(restarted.heldIds()).toEqual([key.id]);
    expect(restarted.privateKey(key.id)).toBeUndefined();
    expect(() => restarted.unlock(newUnlockKey())).toThrow(/does not open/);
    expect(restarted.locked).toBe(true);
    restarted.unlock(unlock);
    expect(restarted.locked).toBe(false);
    expect(restarted.privateKey(key.id)?.export({ format: 'der', type: 'pkcs8' })).toEqual(key.privateKey.export({ format: 'der', type: 'pkcs8' }));
    // A key added while unlocked is sealed too; autolock off writes them back in the clear.
    const more = newClusterKey();
    restarted.add(more.id, more.privateKey);
    expect(new ClusterKeyFiles(dir).locked).toBe(true);
    restarted.reseal(null);
    expect(new ClusterKeyFiles(dir).locked).toBe(false);
  });

  it('write and read the unlock key as text', () => {
    const k = newUnlockKey();
    const text = keyText(unlockKeyPrefix, k);
    expect(text).toMatch(/^SHOAL-UNLOCK-1-[A-Za-z0-9_-]{43}$/);
    expect(parseKeyText(unlockKeyPrefix, ` ${text}\n`)).toEqual(k);
    expect(parseKeyText(unlockKeyPrefix, text.slice(0, -1))).toBeUndefined();
    expect(parseKeyText('SHOAL-RECOVERY-1-', text)).toBeUndefined();
  });
});

describe('the store\'s compact command', () => {
  const stamped = (cmd: Parameters<typeof encodeCommand>[0]['cmd']) => encodeCommand({ cmd, ts: 1, principal: 'shoal:keyring' });

  it('drops every retained event before it at feature level 6, and is refused below it as an older release would', () => {
    const store = new DocumentStore();
    store.apply({ index: 1, term: 1, data: stamped({ op: 'put', collection: 'shoal.secrets', id: 'a', doc: { value: 'cGxhaW4=' } }), featureLevel: 5 });
    store.apply({ index: 2, term: 1, data: stamped({ op: 'put', collection: 'other', id: 'b', doc: {} }), featureLevel: 5 });
    const early = store.apply({ index: 3, term: 1, data: stamped({ op: 'compact' }), featureLevel: 5 });
    expect(early).toMatchObject({ ok: false, error: { code: 'invalid_command' } });
    expect(store.eventsSince(0)).toHaveLength(2);
    const r = store.apply({ index: 4, term: 1, data: stamped({ op: 'compact' }), featureLevel: 6 });
    expect(r).toMatchObject({ ok: true, kind: 'compact', compactedRev: 3, rev: 4 });
    expect(() => store.eventsSince(0)).toThrow(/no longer retained/);
    expect(store.eventsSince(3)).toEqual([]);
    expect(JSON.stringify(store.snapshot())).not.toContain('cGxhaW4=');
    // Documents are untouched, and the events after it are kept as before.
    expect(store.get('other', 'b')).toBeDefined();
    store.apply({ index: 5, term: 1, data: stamped({ op: 'put', collection: 'other', id: 'c', doc: {} }), featureLevel: 6 });
    expect(store.eventsSince(3).map((e) => e.id)).toEqual(['c']);
    const restored = new DocumentStore();
    restored.restore(store.snapshot());
    expect(restored.eventsSince(3).map((e) => e.id)).toEqual(['c']);
  });
});

describe('a storage purge', () => {
  it('leaves nothing its snapshot covers in the log\'s segments or the snapshot files, and the log opens as before', async () => {
    const dir = path.join(tmp, 'purge');
    const needle = Buffer.from('needle-in-the-log-0123456789');
    const s = await DiskStorage.open(dir, { segmentBytes: 4096, preallocateBytes: 4096 });
    const entries: Entry[] = [];
    for (let i = 1; i <= 60; i++) entries.push({ kind: 'normal', index: i, term: 1, data: Buffer.concat([i <= 20 ? needle : Buffer.from(`entry-${i}`), Buffer.alloc(300, 46)]) });
    // In batches, so that the log spans several segments.
    for (let i = 0; i < entries.length; i += 10) await s.save({ entries: entries.slice(i, i + 10), hardState: { term: 1, vote: '', commit: i + 10 } });
    const confState = { ...emptyConfState(), voters: ['a'] };
    await s.createSnapshot(10, confState, Buffer.concat([needle, Buffer.from('snap10')]));
    await s.createSnapshot(40, confState, Buffer.from('snapshot at 40'));
    expect(s.walSegments().length).toBeGreaterThan(1);
    const done = await s.purge(30);
    expect(done.snapshot).toBe(40);
    expect(s.walSegments()).toHaveLength(1);
    expect(s.firstIndex()).toBe(41);
    await s.save({ entries: [{ kind: 'normal', index: 61, term: 1, data: Buffer.from('after') }], hardState: { term: 1, vote: '', commit: 61 } });
    await s.close();
    const bytes = (d: string): Buffer[] => readdirSync(d, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => readFileSync(path.join(e.parentPath, e.name)));
    for (const b of bytes(dir)) expect(b.includes(needle)).toBe(false);
    const again = await DiskStorage.open(dir);
    expect([again.firstIndex(), again.lastIndex(), again.snapshot().meta.index]).toEqual([41, 61, 40]);
    expect(Buffer.from(again.entries(61, 62, 1 << 20)[0]?.kind === 'normal' ? (again.entries(61, 62, 1 << 20)[0] as { data: Uint8Array }).data : []).toString()).toBe('after');
    await again.close();
  });
});
