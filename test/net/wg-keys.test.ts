import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateKeyPair, isWgKey, keyFilePath, loadOrCreateKeyPair, publicKeyOf } from '../../net/wg-keys.ts';

describe('WireGuard keys', () => {
  it('generates keys in wg\'s format, the public key derived from the private one', () => {
    const a = generateKeyPair();
    const b = generateKeyPair();
    expect(isWgKey(a.privateKey) && isWgKey(a.publicKey)).toBe(true);
    expect(a.privateKey).not.toBe(b.privateKey);
    expect(publicKeyOf(a.privateKey)).toBe(a.publicKey);
  });

  // wireguard-tools is installed by .ci/run: a missing `wg` fails here rather than hiding.
  it('derives the same public key as `wg pubkey`', () => {
    const { privateKey, publicKey } = generateKeyPair();
    const r = spawnSync('wg', ['pubkey'], { input: `${privateKey}\n`, encoding: 'utf8' });
    expect(r.stdout.trim()).toBe(publicKey);
    const fromWg = spawnSync('wg', ['genkey'], { encoding: 'utf8' }).stdout.trim();
    expect(publicKeyOf(fromWg)).toBe(spawnSync('wg', ['pubkey'], { input: `${fromWg}\n`, encoding: 'utf8' }).stdout.trim());
  });

  it('refuses what is not a key', () => {
    expect(isWgKey('abc')).toBe(false);
    // 32 bytes need 43 characters, the last with its two low bits zero.
    expect(isWgKey('QM/akMbHfBjOZtii8svoi73ouWVWHCZTeCTSREw+7mh=')).toBe(false);
    expect(() => publicKeyOf('abc')).toThrow(expect.objectContaining({ code: 'bad_request' }));
  });

  it('creates the key file once, mode 0600, and reads it back', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-wgkeys-'));
    const first = loadOrCreateKeyPair(dir);
    expect(statSync(keyFilePath(dir)).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFilePath(dir), 'utf8').trim()).toBe(first.privateKey);
    expect(loadOrCreateKeyPair(dir)).toEqual(first);
  });

  it('refuses a damaged key file with config_invalid', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-wgkeys-'));
    loadOrCreateKeyPair(dir);
    writeFileSync(keyFilePath(dir), 'garbage\n');
    expect(() => loadOrCreateKeyPair(dir)).toThrow(expect.objectContaining({ code: 'config_invalid' }));
  });
});
