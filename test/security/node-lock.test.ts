// Autolock on one node's disk (src/security/node-lock.ts, key-vault.ts): the cluster keys and the
// CA key sealed with the unlock key, nothing of them left in the clear; a node started on that
// directory is locked; a wrong unlock key changes nothing; the right one opens every key; off
// writes them back in the clear.

import { mkdtempSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { newClusterKey } from '../../src/resources/secret-crypto.ts';
import { caKeyFile } from '../../src/security/authority.ts';
import { ClusterKeyFiles } from '../../src/security/cluster-key-files.ts';
import { holdsKeyFile, readKeyFile, writeKeyFile } from '../../src/security/key-vault.ts';
import { NodeLock } from '../../src/security/node-lock.ts';
import { newUnlockKey } from '../../src/security/unlock-key.ts';

const caKeyPem = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+test+only+not+a+real+ca+key+0000000000000\n-----END PRIVATE KEY-----\n';

/** Every file under the data directory's tls/, with its text. */
function tlsFiles(dir: string): Record<string, string> {
  const tls = path.join(dir, 'tls');
  const out: Record<string, string> = {};
  for (const e of readdirSync(tls, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[path.relative(tls, path.join(e.parentPath, e.name))] = readFileSync(path.join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

/** A node's start on `dir`: its keys read from the disk, and its lock. */
function boot(dir: string): { keys: ClusterKeyFiles; lock: NodeLock } {
  const keys = new ClusterKeyFiles(dir);
  return { keys, lock: new NodeLock(dir, keys) };
}

describe('autolock on a node', () => {
  it('seals every key, starts locked, refuses a wrong key without a change, opens with the right one, and writes them back in the clear when off', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-lock-'));
    mkdirSync(path.join(dir, 'tls'), { mode: 0o700 });
    writeKeyFile(caKeyFile(dir), caKeyPem);
    const key = newClusterKey();
    const first = boot(dir);
    first.keys.add(key.id, key.privateKey);
    expect(first.lock.locked).toBe(false);

    const unlockKey = newUnlockKey();
    first.lock.autolock(unlockKey);
    const sealed = tlsFiles(dir);
    expect(Object.keys(sealed).sort()).toEqual(['ca.key.sealed', `cluster-keys/${key.id}.key`]);
    expect(JSON.stringify(sealed)).not.toContain('PRIVATE KEY');
    expect(JSON.parse(sealed[`cluster-keys/${key.id}.key`] ?? '{}')).toHaveProperty('sealed');
    // A key written while autolock is on is sealed too.
    const second = newClusterKey();
    first.keys.add(second.id, second.privateKey);
    expect(JSON.parse(tlsFiles(dir)[`cluster-keys/${second.id}.key`] ?? '{}')).toHaveProperty('sealed');

    // Restarted: locked, the keys held but not usable.
    const restarted = boot(dir);
    expect(restarted.lock.locked).toBe(true);
    expect(holdsKeyFile(caKeyFile(dir))).toBe(true);
    expect(readKeyFile(caKeyFile(dir))).toBeUndefined();
    expect(restarted.keys.privateKey(key.id)).toBeUndefined();
    expect(() => writeKeyFile(caKeyFile(dir), caKeyPem)).toThrow(/autolocked/);

    const before = tlsFiles(dir);
    expect(() => restarted.lock.unlock(newUnlockKey())).toThrow();
    expect(restarted.lock.locked).toBe(true);
    expect(readKeyFile(caKeyFile(dir))).toBeUndefined();
    expect(tlsFiles(dir)).toEqual(before);

    restarted.lock.unlock(unlockKey);
    expect(restarted.lock.locked).toBe(false);
    expect(readKeyFile(caKeyFile(dir))).toBe(caKeyPem);
    expect(restarted.keys.privateKey(key.id)?.export({ format: 'der', type: 'pkcs8' })).toEqual(key.privateKey.export({ format: 'der', type: 'pkcs8' }));

    restarted.lock.autolock(null);
    const clear = tlsFiles(dir);
    expect(Object.keys(clear).sort()).toEqual(['ca.key', `cluster-keys/${key.id}.key`, `cluster-keys/${second.id}.key`].sort());
    expect(clear['ca.key']).toBe(caKeyPem);
    expect(boot(dir).lock.locked).toBe(false);
  });
});
