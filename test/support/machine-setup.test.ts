// npm run test:setup (machine-setup.ts): which Debian packages it installs for which missing
// commands, and that the README's Quick start, package.json and .ci/run agree on the one line
// that sets a fresh machine up and runs the tests.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { installMissing, missingPackages, requirements, type Probe } from './machine-setup.ts';

const read = (p: string): string => readFileSync(new URL(`../../${p}`, import.meta.url), 'utf8');

const probe = (commands: string[], pkgs: string[] = []): Probe => ({
  command: (c) => commands.includes(c),
  pkg: (p) => pkgs.includes(p),
});
const allCommands = requirements.flatMap((r) => ('command' in r.has ? [r.has.command] : []));
const allPkgs = requirements.flatMap((r) => ('pkg' in r.has ? [r.has.pkg] : []));

describe('test:setup', () => {
  it('installs nothing when every command and package is there', () => {
    expect(missingPackages(probe(allCommands, allPkgs))).toEqual([]);
  });

  it('names each missing package once, in the list\'s order', () => {
    const without = (...gone: string[]) => probe(allCommands.filter((c) => !gone.includes(c)), allPkgs);
    expect(missingPackages(without('promtool', 'prometheus', 'chromium'))).toEqual(['prometheus', 'chromium']);
    expect(missingPackages(probe(allCommands))).toEqual(['busybox-static', 'libjemalloc2']);
    // A fresh machine: everything .ci/run installed before test:setup existed.
    expect(missingPackages(probe([])).sort()).toEqual(['busybox-static', 'chromium', 'conntrack', 'docker.io', 'iproute2', 'iptables', 'iputils-ping',
      'nftables', 'prometheus', 'systemd', 'tcpdump', 'util-linux', 'wireguard-go', 'wireguard-tools',
      // Issue 40's private registry tests.
      'apache2-utils', 'docker-registry', 'openssl',
      // Issue 43's SFTP backup target tests.
      'openssh-server',
      // Issue 38's virtual IP tests.
      'arping',
      // Issue 41's replicated volumes, and the database engine its system test runs.
      'btrfs-progs', 'sqlite3',
      // Issue 45's allocator.
      'libjemalloc2'].sort());
  });

  it('says what to run where it cannot install', () => {
    expect(() => installMissing(probe(allCommands.filter((c) => c !== 'wg'), allPkgs)))
      .toThrow('the tests need wireguard-tools, and this machine has no apt-get: install them by hand (Debian names; the command there: apt-get install -y --no-install-recommends wireguard-tools)');
    expect(installMissing(probe(allCommands, allPkgs))).toEqual([]);
  });

  it('is the README\'s test line, which .ci/run runs as it is, and the Quick start has two command lines', () => {
    const quick = /## Quick start\n\n```sh\n([\s\S]*?)```/.exec(read('README.md'))?.[1] ?? '';
    const lines = quick.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toEqual(['npm ci && npx shoal dev', 'npm ci && npm run test:setup && npm test']);
    const ci = read('.ci/run').split('\n').filter((l) => !l.startsWith('#'));
    expect(ci.filter((l) => l.startsWith(lines[1] ?? '-'))).toEqual([`${lines[1]} || exit $?`]);
    expect((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts['test:setup']).toBe('tsx test/support/machine-setup.ts');
  });
});
