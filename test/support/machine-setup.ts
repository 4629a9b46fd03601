// `npm run test:setup`: what `npm test` needs on the machine besides Node.js and node_modules,
// made ready on Debian (or Ubuntu) as root. The README's test line and .ci/run run it between
// `npm ci` and `npm test`:
//
//   - the Debian packages below, for those whose command (or package) is missing: one
//     `apt-get update` and one `apt-get install --no-install-recommends` of just those;
//   - a Docker daemon answering on /var/run/docker.sock (test/executor/dockerd.ts starts dockerd).
//
// With everything there it installs nothing and takes well under a second, so it runs before
// every `npm test` of CI. `--check` says what is missing and changes nothing.

import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { dockerdLogPath, ensureDockerd } from '../executor/dockerd.ts';

/** Something the tests use, and the Debian package that brings it. */
export interface Requirement {
  /** A command looked up on PATH, or a Debian package looked up with dpkg-query. */
  has: { command: string } | { pkg: string };
  pkg: string;
  /** Which tests need it. */
  for: string;
}

export const requirements: readonly Requirement[] = [
  { has: { command: 'ip' }, pkg: 'iproute2', for: 'fault and network tests (namespaces, veths, bridges)' },
  { has: { command: 'nft' }, pkg: 'nftables', for: 'fault and firewall tests' },
  { has: { command: 'iptables' }, pkg: 'iptables', for: 'firewall tests (beside Docker\'s rules)' },
  { has: { command: 'unshare' }, pkg: 'util-linux', for: 'fault tests' },
  { has: { command: 'ping' }, pkg: 'iputils-ping', for: 'network tests' },
  { has: { command: 'dockerd' }, pkg: 'docker.io', for: 'Docker tests (test/executor, test/system)' },
  { has: { command: 'docker' }, pkg: 'docker.io', for: 'overlay tests (docker exec, test/net)' },
  // The static build: `docker import` of it makes the tests' image with nothing pulled.
  { has: { pkg: 'busybox-static' }, pkg: 'busybox-static', for: 'the Docker tests\' image' },
  { has: { command: 'promtool' }, pkg: 'prometheus', for: 'monitoring tests (test/observability)' },
  { has: { command: 'prometheus' }, pkg: 'prometheus', for: 'the documented scrape config (test/cli/dev.test.ts)' },
  { has: { command: 'systemd-analyze' }, pkg: 'systemd', for: 'the unit shoal install writes (test/cli/install.test.ts)' },
  { has: { command: 'wg' }, pkg: 'wireguard-tools', for: 'mesh tests (test/net)' },
  { has: { command: 'wireguard-go' }, pkg: 'wireguard-go', for: 'mesh tests (test/net)' },
  { has: { command: 'tcpdump' }, pkg: 'tcpdump', for: 'mesh tests (test/net)' },
  { has: { command: 'conntrack' }, pkg: 'conntrack', for: 'firewall tests (test/net)' },
  { has: { command: 'chromium' }, pkg: 'chromium', for: 'console tests (test/console)' },
  // A real private registry (issue 40): TLS with a CA the test makes, an htpasswd (bcrypt) login.
  { has: { command: 'docker-registry' }, pkg: 'docker-registry', for: 'private registry tests (test/system/registries.test.ts)' },
  { has: { command: 'htpasswd' }, pkg: 'apache2-utils', for: 'private registry tests (the registry\'s login)' },
  { has: { command: 'openssl' }, pkg: 'openssl', for: 'private registry tests (the registry\'s CA and certificate)' },
  // An SFTP backup target (issue 43): OpenSSH's sshd and sftp-server on loopback, started by the test.
  { has: { command: 'sshd' }, pkg: 'openssh-server', for: 'SFTP backup target tests (test/api/backups.test.ts)' },
  // Virtual IPs (issue 38): the holder's gratuitous ARP (Debian's arping, Thomas Habets').
  { has: { command: 'arping' }, pkg: 'arping', for: 'virtual IP tests (test/system/vip-netns.test.ts)' },
  // Replicated volumes (issue 41): a btrfs filesystem per volume in a loop file.
  { has: { command: 'btrfs' }, pkg: 'btrfs-progs', for: 'replicated volume tests (test/volumes)' },
  // A real database engine as a replicated volume's workload, copied with its libraries into an image.
  { has: { command: 'sqlite3' }, pkg: 'sqlite3', for: 'the replicated volume test\'s database (test/system/replicated-volume.test.ts)' },
  // The allocator shoal starts its nodes with when it is installed (issue 45, src/cli/node-environment.ts).
  { has: { pkg: 'libjemalloc2' }, pkg: 'libjemalloc2', for: 'nodes on jemalloc (test/cli/node-environment.test.ts, test/cli/dev.test.ts)' },
];

export interface Probe {
  command(name: string): boolean;
  pkg(name: string): boolean;
}

/** The packages to install: those of every requirement not met, once each, in the list's order. */
export function missingPackages(probe: Probe, reqs: readonly Requirement[] = requirements): string[] {
  const missing = reqs.filter((r) => ('command' in r.has ? !probe.command(r.has.command) : !probe.pkg(r.has.pkg)));
  return [...new Set(missing.map((r) => r.pkg))];
}

const dpkgTimeoutMs = 10_000;
/** Downloads included: chromium alone is over 100 MB. */
const aptTimeoutMs = 30 * 60_000;

/** PATH, and the sbin folders a non-login root shell may leave out of it. */
function searchPath(): string[] {
  return [...new Set([...(process.env.PATH ?? '').split(path.delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'].filter((d) => d !== ''))];
}

export const machineProbe: Probe = {
  command(name) {
    return searchPath().some((dir) => {
      try {
        accessSync(path.join(dir, name), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
  },
  pkg(name) {
    const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8', timeout: dpkgTimeoutMs });
    return r.status === 0 && r.stdout.trim() === 'install ok installed';
  },
};

function apt(args: string[]): void {
  const r = spawnSync('apt-get', args, { stdio: ['ignore', 'inherit', 'inherit'], timeout: aptTimeoutMs, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (r.error !== undefined || r.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}); see its output above`);
}

/** Installs what is missing; returns what it installed. Throws, saying what to do, when it cannot. */
export function installMissing(probe: Probe = machineProbe): string[] {
  const missing = missingPackages(probe);
  if (missing.length === 0) return [];
  const command = `apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  if (!probe.command('apt-get')) throw new Error(`the tests need ${missing.join(', ')}, and this machine has no apt-get: install them by hand (Debian names; the command there: ${command})`);
  if (process.getuid?.() !== 0) throw new Error(`the tests need ${missing.join(', ')}; installing them, and the tests themselves, need root: sudo npm run test:setup (it runs ${command})`);
  console.log(`== test:setup: installing ${missing.join(' ')}`);
  apt(['update', '-qq']);
  apt(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
  const still = missingPackages(probe);
  if (still.length > 0) throw new Error(`still missing after apt-get install: ${still.join(', ')}`);
  return missing;
}

export const machineSetupHelp = `Usage: npm run test:setup [-- --check] [-- --json]

Makes this machine ready for npm test: installs the Debian packages the tests use when their
commands are missing (${[...new Set(requirements.map((r) => r.pkg))].join(', ')}),
with apt-get, as root; then starts dockerd unless Docker answers on /var/run/docker.sock (its
log: ${dockerdLogPath}). With everything there it changes nothing.

  --check   say what is missing, change nothing (exit 1 if anything is)
  --json    print {missing, installed, docker} as one JSON object

Exit codes: 0 ready; 1 something is missing and could not be installed (the message says what
to run), or dockerd did not start.`;

async function main(argv: string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    console.log(machineSetupHelp);
    return 0;
  }
  const unknown = argv.filter((a) => a !== '--check' && a !== '--json');
  if (unknown.length > 0) {
    console.error(`test:setup: unknown option ${unknown.join(' ')}\n${machineSetupHelp.split('\n')[0]}`);
    return 2;
  }
  const json = argv.includes('--json');
  if (argv.includes('--check')) {
    const missing = missingPackages(machineProbe);
    if (json) console.log(JSON.stringify({ missing, installed: [], docker: null }));
    else console.log(missing.length === 0 ? '== test:setup: every package the tests use is installed' : `== test:setup: missing ${missing.join(' ')} (npm run test:setup installs them, as root)`);
    return missing.length === 0 ? 0 : 1;
  }
  const installed = installMissing();
  const { started } = await ensureDockerd();
  if (json) console.log(JSON.stringify({ missing: [], installed, docker: started ? 'started' : 'running' }));
  else console.log(`== test:setup: ${installed.length === 0 ? 'every package the tests use is installed' : `installed ${installed.join(' ')}`}; ${started ? `started dockerd (log: ${dockerdLogPath})` : 'dockerd is running'}`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (err: unknown) => {
      console.error(`test:setup: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    },
  );
}
