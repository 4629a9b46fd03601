// How the CLI finds its credential, what a credential file may hold, and where
// api.insecureLoopback is allowed.

import { mkdtempSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findCredential, readCredential, writeCredential, type CredentialFile } from '../../src/cli/credential-file.ts';
import { takeCredentialFlag } from '../../src/cli/credential-flag.ts';
import { isLoopbackHost, parseConfig } from '../../src/server/config.ts';
import { ShoalError } from '../../src/errors.ts';

const saved = { SHOAL_CONFIG: process.env.SHOAL_CONFIG, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME };
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const pem = (label: string) => `-----BEGIN ${label}-----\nAAAA\n-----END ${label}-----\n`;
const sample: CredentialFile = {
  version: 1, clusterId: 'c1', ca: pem('CERTIFICATE'), addresses: ['127.0.0.1:7101'], principal: 'alice', role: 'admin',
  token: `shoal_0123456789abcdef.${'a'.repeat(43)}`,
};

describe('credential discovery', () => {
  it('takes --credential first, then $SHOAL_CONFIG, then ~/.config/shoal ($XDG_CONFIG_HOME)', () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'shoal-home-'));
    const cfg = mkdtempSync(path.join(os.tmpdir(), 'shoal-cfg-'));
    process.env.XDG_CONFIG_HOME = home;
    mkdirSync(path.join(home, 'shoal'));
    writeFileSync(path.join(home, 'shoal', 'credential.json'), '{}');
    delete process.env.SHOAL_CONFIG;
    // The credential.json of before contexts is the context `default`.
    expect(findCredential(undefined)).toEqual({ file: path.join(home, 'shoal', 'credential.json'), source: '~/.config/shoal', context: 'default' });
    // $SHOAL_CONFIG set: the home file is never read, even when SHOAL_CONFIG holds none.
    process.env.SHOAL_CONFIG = cfg;
    expect(findCredential(undefined)).toBeUndefined();
    writeFileSync(path.join(cfg, 'credential.json'), '{}');
    expect(findCredential(undefined)?.source).toBe('$SHOAL_CONFIG');
    expect(findCredential('x.json')).toEqual({ file: path.resolve('x.json'), source: '--credential' });
  });

  it('writes a file only its owner reads, and reads it back; refuses one with both a token and a certificate', () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-cred-')), 'sub', 'credential.json');
    writeCredential(file, sample);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readCredential({ file, source: '--credential' })).toEqual(sample);
    writeFileSync(file, JSON.stringify({ ...sample, cert: pem('CERTIFICATE'), key: pem('PRIVATE KEY') }));
    expect(() => readCredential({ file, source: '--credential' })).toThrow(/either cert and key, or token/);
    writeFileSync(file, 'not json');
    expect(() => readCredential({ file, source: '--credential' })).toThrow(ShoalError);
  });

  it('keeps another real cluster\'s credential beside the one it writes; a loopback (dev) one or the same cluster\'s is replaced', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-cred-keep-'));
    const file = path.join(dir, 'credential.json');
    const home: CredentialFile = { ...sample, clusterId: 'home', addresses: ['10.0.0.1:7100'] };
    writeCredential(file, home);
    writeCredential(file, { ...sample, clusterId: 'lab' });
    expect(readCredential({ file, source: '--credential' }).clusterId).toBe('lab');
    expect(readCredential({ file: path.join(dir, 'credential.home.json'), source: '--credential' })).toEqual(home);
    // The replaced one was a loopback cluster's (as shoal dev's): not kept.
    writeCredential(file, { ...home, principal: 'bob' });
    expect(readdirSync(dir).sort()).toEqual(['credential.home.json', 'credential.json']);
    // The same cluster's: replaced, not kept.
    writeCredential(file, home);
    expect(readdirSync(dir).sort()).toEqual(['credential.home.json', 'credential.json']);
    expect(readCredential({ file, source: '--credential' })).toEqual(home);
  });

  it('takes --credential off any command line', () => {
    const argv = ['doc', 'get', 'a', 'b', '--credential', 'f.json', '--json'];
    expect(takeCredentialFlag(argv)).toBe('f.json');
    expect(argv).toEqual(['doc', 'get', 'a', 'b', '--json']);
    const eq = ['status', '--credential=g.json'];
    expect(takeCredentialFlag(eq)).toBe('g.json');
    expect(eq).toEqual(['status']);
    expect(() => takeCredentialFlag(['status', '--credential'])).toThrow(/needs a value/);
    expect(takeCredentialFlag(['status'])).toBeUndefined();
  });
});

describe('api.insecureLoopback', () => {
  const base = { dataDir: '.', peer: { listen: '127.0.0.1:7201' } };

  it('is allowed on a loopback address', () => {
    for (const listen of ['127.0.0.1:7101', '127.5.6.7:7101', 'localhost:7101', '[::1]:7101']) {
      expect(parseConfig({ ...base, api: { listen, insecureLoopback: true } }, 'test').api.insecureLoopback, listen).toBe(true);
    }
  });

  it('is refused (config_invalid) on any other address, naming the key', () => {
    for (const listen of ['0.0.0.0:7101', '192.168.1.5:7101', 'node1.lan:7101', '[::]:7101']) {
      let err: unknown;
      try {
        parseConfig({ ...base, api: { listen, insecureLoopback: true } }, 'test');
      } catch (e) {
        err = e;
      }
      expect(err, listen).toBeInstanceOf(ShoalError);
      expect((err as ShoalError).code).toBe('config_invalid');
      expect((err as ShoalError).message).toContain('api.insecureLoopback');
    }
  });

  it('is off unless asked for', () => {
    expect(parseConfig({ ...base, api: { listen: '127.0.0.1:7101' } }, 'test').api.insecureLoopback).toBe(false);
    expect(isLoopbackHost('127.0.0.1')).toBe(true);
    expect(isLoopbackHost('10.0.0.1')).toBe(false);
  });
});
