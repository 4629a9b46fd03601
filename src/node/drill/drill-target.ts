// The drill actions' view of a running node (drill-actions.ts DrillTarget): this process, its
// storage seam and its members. Only `shoal serve` hands it to the API: an exit or a SIGSTOP of
// a process that hosts other things (a test runner) would take them down too.

import type { DrillTarget } from './drill-actions.ts';
import { drillHoldFile, writeDrillHold } from './drill-hold.ts';
import type { DrillStorage } from './drill-storage.ts';
import type { RaftNode } from '../raft-node.ts';

export function drillTargetOf(storage: DrillStorage, peerListen: string, node: RaftNode, dataDir: string): DrillTarget {
  return {
    // Abrupt on purpose: no hand-over, no drain; the service manager restarts the process.
    exit: (code) => process.exit(code),
    stallDisk: (ms) => storage.stall(ms),
    peerListen,
    members: () => node.membership.list(),
    pid: process.pid,
    holdNextStart: (seconds) => {
      writeDrillHold(dataDir, Date.now() + seconds * 1000, 'node-reboot');
      return drillHoldFile(dataDir);
    },
  };
}
