// The service manager of the rolling-upgrade test, as systemd runs a node installed with `shoal
// install`: each node is `node <data>/releases/current/bin/shoal.js serve`, started again at once
// when it exits with code 10 ("restart me"), so a node that activated a new build comes back
// running what releases/current names now. A node that exits otherwise stays down.

import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { restartExitCode } from '../../src/node/drill/drill-actions.ts';
import { releaseMarkerFile, releaseName, type ReleaseMarker } from '../../src/node/upgrade/upgrade-releases.ts';
import type { ClusterNode } from './process-cluster.ts';
import { repoRoot } from './upgrade-builds.ts';

/** Unpacks `tarball` as the node's first release and points releases/current at it (what `shoal install` does from a package). */
export function seedFromTarball(node: ClusterNode, tarball: string): string {
  const releases = path.join(node.dir, 'releases');
  mkdirSync(releases, { recursive: true });
  const tmp = mkdtempSync(path.join(releases, '.seed-'));
  execFileSync('tar', ['-xzf', tarball, '-C', tmp]);
  const pkgDir = path.join(tmp, 'package');
  const version = (JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  const sha256 = createHash('sha256').update(readFileSync(tarball)).digest('hex');
  const name = releaseName(version, sha256);
  symlinkSync(realpathSync(path.join(repoRoot, 'node_modules')), path.join(pkgDir, 'node_modules'));
  const marker: ReleaseMarker = { name, version, sha256, receivedAt: new Date().toISOString(), nodeModules: 'shared' };
  writeFileSync(path.join(pkgDir, releaseMarkerFile), JSON.stringify(marker));
  renameSync(pkgDir, path.join(releases, name));
  rmSync(tmp, { recursive: true, force: true });
  symlinkSync(name, path.join(releases, 'current'));
  return name;
}

export class ReleaseSupervisor {
  /** Restarts after exit code 10, per node name. */
  readonly restarts = new Map<string, number>();
  /** Exits that were not asked for and not code 10. */
  readonly unexpected: string[] = [];
  private stopping = false;
  /** Nodes asked to stop (by stop()): their exit is not unexpected. */
  private readonly stopped = new Set<string>();

  constructor(private readonly nodes: ClusterNode[]) {}

  startAll(): void {
    for (const n of this.nodes) this.spawn(n);
  }

  private spawn(node: ClusterNode): void {
    const entry = path.join(node.dir, 'releases', 'current', 'bin', 'shoal.js');
    const env = { ...process.env };
    delete env.SHOAL_FROM_SOURCE;
    const proc = spawn(process.execPath, [entry, 'serve', '--config', path.join(node.dir, 'shoal.yaml')], { stdio: ['ignore', 'pipe', 'pipe'], env });
    const keep = (b: Buffer): void => {
      node.logs.push(b.toString());
      if (node.logs.length > 2000) node.logs.splice(0, 1000);
    };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    node.proc = proc;
    proc.once('exit', (code, signal) => {
      if (node.proc === proc) node.proc = undefined;
      if (this.stopping || this.stopped.has(node.name)) return;
      if (code === restartExitCode) {
        this.restarts.set(node.name, (this.restarts.get(node.name) ?? 0) + 1);
        this.spawn(node);
        return;
      }
      this.unexpected.push(`${node.name} exited with ${code ?? signal}`);
    });
  }

  /** Stops one node gracefully (SIGTERM), as `systemctl stop` does; it stays down until start(). */
  async stop(node: ClusterNode): Promise<void> {
    this.stopped.add(node.name);
    const p = node.proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  }

  start(node: ClusterNode): void {
    this.stopped.delete(node.name);
    this.spawn(node);
  }

  /** SIGKILL to every node; nothing is restarted from then on. */
  async killAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.nodes.map((n) => new Promise<void>((resolve) => {
      const p = n.proc;
      if (p === undefined || p.exitCode !== null || p.signalCode !== null) return resolve();
      p.once('exit', () => resolve());
      p.kill('SIGKILL');
    })));
  }
}
