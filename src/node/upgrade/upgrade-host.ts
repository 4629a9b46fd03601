// What the upgrade routes (src/api/upgrade-routes.ts) act on: this node's releases folder and,
// when the node owns its process (`shoal serve`), the restart that hands the process to its
// service manager. A node inside another process (a test) gets no restart: activation is refused
// before any link changes.

import { featureLevelMax } from '../../base/feature-level.ts';
import { restartExitCode } from '../drill/drill-actions.ts';
import { runningPackageRoot } from './upgrade-package-root.ts';
import { Releases } from './upgrade-releases.ts';

export interface UpgradeHost {
  releases: Releases;
  /** The package folder this process runs from. */
  runningRoot: string;
  /** The Node.js binary a new build is checked with. */
  nodeBinary: string;
  /**
   * Stops the node gracefully (a leader hands leadership over, the API answers what it holds),
   * then exits with restartExitCode so the service manager starts what releases/current names.
   */
  restart?: () => void;
}

/** The host of a `shoal serve` process: `stop` is the node's graceful stop. */
export function processUpgradeHost(dataDir: string, stop: () => Promise<void>, log: { error(msg: string): void }): UpgradeHost {
  const runningRoot = runningPackageRoot();
  let restarting = false;
  const releases = Releases.ofDataDir(dataDir, runningRoot);
  // This build says which feature level it applies, for a later rollback or activation to check.
  const running = releases.running();
  if (running !== null) {
    try {
      releases.recordLevel(running, featureLevelMax);
    } catch (err) {
      log.error(`upgrade: could not record the feature level of release ${running}: ${(err as Error).message}`);
    }
  }
  return {
    releases,
    runningRoot,
    nodeBinary: process.execPath,
    restart: () => {
      if (restarting) return;
      restarting = true;
      void stop()
        .catch((err: unknown) => log.error(`upgrade: the graceful stop failed (${(err as Error).message}); exiting anyway`))
        .finally(() => process.exit(restartExitCode));
    },
  };
}

/** A host with no restart, for a node that does not own its process. */
export function inertUpgradeHost(dataDir: string): UpgradeHost {
  const runningRoot = runningPackageRoot();
  return { releases: Releases.ofDataDir(dataDir, runningRoot), runningRoot, nodeBinary: process.execPath };
}
