// shoal init checks its flags with the rules shoal serve applies (ports 1-65535, the node-name
// rule) before writing anything, and its default ports stay clear of shoal dev's. Also the
// version, one source of truth: package.json.

import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import pkg from '../../package.json' with { type: 'json' };
import { initApiDefault, initPeerDefault } from '../../src/cli/init.ts';
import { parseConfig } from '../../src/server/config.ts';
import { isHostPort } from '../../src/base/host-port.ts';
import { loadIdentity, nodeNamePattern } from '../../src/node/identity.ts';
import { softwareVersion } from '../../src/server/server.ts';
import { inProcess } from './in-process.ts';
import { readPendingKeyring } from '../../src/node/secrets/pending-keyring.ts';
import { privateKeyOf, unwrapDataKey, type WrappedKey } from '../../src/resources/secret-crypto.ts';
import { ClusterKeyFiles } from '../../src/security/cluster-key-files.ts';
import { parseKeyText, recoveryKeyPrefix } from '../../src/security/unlock-key.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';


const tmp = (): string => mkdtempSync(path.join(os.tmpdir(), 'shoal-init-'));

describe('shoal init', () => {
  it('refuses a port out of range and a bad name at once, with exit 2, and writes nothing', async () => {
    const dir = path.join(tmp(), 'n1');
    const r = await inProcess('init', '--data', dir, '--peer', '127.0.0.1:99999', '--name', 'bad name!');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--name 'bad name!': a node name is 1 to 63 of a-z, 0-9 and '-'");
    expect(r.stderr).toContain("--peer '127.0.0.1:99999': the port must be from 1 to 65535, got 99999");
    expect(existsSync(dir)).toBe(false);
    const json = await inProcess('init', '--data', dir, '--api', '127.0.0.1:0', '--name', 'n1', '--json');
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'usage', message: expect.stringContaining("--api '127.0.0.1:0'") }, exitCode: 2 });
    expect(existsSync(dir)).toBe(false);
  });

  it('writes a config with default ports clear of shoal dev (7101-7107, 7201-7207), one that serve accepts', async () => {
    const dir = path.join(tmp(), 'alpha');
    const r = await inProcess('init', '--data', dir, '--name', 'alpha', '--no-start');
    expect(r.code, r.stderr).toBe(0);
    const config = parseYaml(readFileSync(path.join(dir, 'shoal.yaml'), 'utf8')) as { api: { listen: string }; peer: { listen: string } };
    expect(config).toMatchObject({ api: { listen: initApiDefault }, peer: { listen: initPeerDefault } });
    const port = (hp: string): number => Number(hp.split(':')[1]);
    for (const p of [port(initApiDefault), port(initPeerDefault)]) {
      expect(p >= 7101 && p <= 7107, `${p}`).toBe(false);
      expect(p >= 7201 && p <= 7207, `${p}`).toBe(false);
    }
    expect(() => parseConfig(config, 'shoal.yaml')).not.toThrow();
    // The recovery key is printed once, and opens the cluster key the founding keyring names.
    const shown = r.stdout.match(/SHOAL-RECOVERY-1-[A-Za-z0-9_-]+/g) ?? [];
    expect(shown).toHaveLength(1);
    const pending = readPendingKeyring(dir, () => undefined);
    const key = pending?.keyring.keys[0];
    expect(pending?.replace).toBe(false);
    expect(key?.recovery).not.toBeNull();
    const raw = parseKeyText(recoveryKeyPrefix, shown[0] ?? '') as Buffer;
    const opened = privateKeyOf(unwrapDataKey(key?.recovery as WrappedKey, `cluster key ${key?.id}`, privateKeyOf(raw)));
    expect(new ClusterKeyFiles(dir).privateKey(key?.id ?? '')?.export({ format: 'der', type: 'pkcs8' })).toEqual(opened.export({ format: 'der', type: 'pkcs8' }));
  });

  it('refuses the same address for the API and the peer transport', async () => {
    const r = await inProcess('init', '--data', path.join(tmp(), 'x'), '--name', 'x', '--api', '127.0.0.1:7300', '--peer', '127.0.0.1:7300');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('must differ from --api');
  });
});

describe('the rules init shares with serve', () => {
  it('host:port takes ports 1 to 65535 only, in the config as on the command line', () => {
    for (const ok of ['127.0.0.1:1', 'node-1.lan:65535', '[::1]:7100', '0.0.0.0:7100']) expect(isHostPort(ok), ok).toBe(true);
    for (const bad of ['127.0.0.1:0', '127.0.0.1:65536', '127.0.0.1:99999', 'nowhere', '127.0.0.1:', ':7100', 'a b:1', 'http://x:1']) expect(isHostPort(bad), bad).toBe(false);
    const base = { dataDir: '.', api: { listen: '127.0.0.1:7100' }, peer: { listen: '127.0.0.1:7200' } };
    expect(() => parseConfig({ ...base, peer: { listen: '127.0.0.1:70000' } }, 'c.yaml')).toThrow(/peer\.listen: the port must be from 1 to 65535/);
    expect(() => parseConfig({ ...base, join: { api: '10.0.0.1:0' } }, 'c.yaml')).toThrow(/join\.api/);
  });

  it('names: 1 to 63 of [a-z0-9-], starting with a letter or digit', () => {
    for (const ok of ['n1', 'alpha', '7', 'db-2', 'a'.repeat(63)]) expect(nodeNamePattern.test(ok), ok).toBe(true);
    for (const bad of ['', '-a', 'Alpha', 'bad name!', 'a_b', 'a'.repeat(64), 'n1.lan']) expect(nodeNamePattern.test(bad), bad).toBe(false);
  });

  it('an identity written before the name rule still loads', () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'node.json'), JSON.stringify({ id: 'abc', name: 'Old Name_1', clusterId: 'c1' }));
    mkdirSync(path.join(dir, 'tls'));
    expect(loadIdentity(dir).name).toBe('Old Name_1');
  });
});

describe('versions', () => {
  it('shoal --version and shoal version print package.json\'s version, which the nodes report', async () => {
    expect(softwareVersion).toBe(pkg.version);
    const flag = await inProcess('--version');
    expect(flag.code).toBe(0);
    expect(flag.stdout).toMatch(new RegExp(`^shoal ${pkg.version.replaceAll('.', '\\.')} \\(Node\\.js v`));
    const json = await inProcess('version', '--json');
    expect(JSON.parse(json.stdout)).toEqual({ version: pkg.version, node: process.version, platform: `${process.platform}-${process.arch}`, featureLevelMax });
  });
});
