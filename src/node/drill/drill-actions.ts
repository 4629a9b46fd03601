// The faults a node carries out on itself when a drill asks (POST /v1/drill/actions;
// docs/operations.md, "Failover drills"). They reach the target over the cluster's own API, so a
// drill needs no SSH:
//
//   kill        the process exits at once, without a graceful stop, with the exit code that asks
//               its service manager (systemd's unit from `shoal install`, or `shoal dev`) to start
//               it again
//   isolate     its peer links are cut for N seconds by an nftables set whose elements time out
//               (drill-nft.ts), so the cut heals even if the node dies meanwhile
//   pause       a detached helper process SIGSTOPs the node, then SIGCONTs it N seconds later
//   disk-stall  every durable write waits N seconds (drill-storage.ts), as on a stalled disk
//   reboot      one machine cannot reboot itself and watch: emulated as a kill whose restart
//               waits until N seconds after the fault (drill-hold.ts), so the node is off for
//               that long, as a machine that reboots
//
// An action does not ask the services' disruption budgets itself (docs/control-plane.md, "The
// disruption budget"): `shoal drill` asks before it sends one (POST /v1/nodes/{ref}/disruption,
// decided on the leader's state, waiting or --force recorded on each service), and the node that
// carries the action out may be the one cut off from the leader, which must still obey. So this
// route is admin only, and the budget is the drill's to ask, as the quorum check is.

import { spawn } from 'node:child_process';
import { z } from 'zod';
import { ShoalError } from '../../errors.ts';
import type { MemberRecord } from '../../resources/membership.ts';
import { splitHostPort } from '../../base/host-port.ts';
import { isolatePorts } from './drill-nft.ts';

/** A fault lasts at most this long: a drill that forgets to end must not leave a node cut off. */
export const drillSecondsMax = 600;

export const drillActionSchema = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('kill') }),
  z.strictObject({ action: z.enum(['isolate', 'pause', 'disk-stall', 'reboot']), seconds: z.number().positive().max(drillSecondsMax) }),
]);
export type DrillAction = z.infer<typeof drillActionSchema>;

/** What the actions act on; the real process in server.ts, fakes in tests. */
export interface DrillTarget {
  /** Exits the process with `code` now (no graceful stop). */
  exit(code: number): void;
  /** Makes every durable write wait until `ms` from now. */
  stallDisk(ms: number): void;
  /** This node's peer listen address, and the members (for their peer ports). */
  peerListen: string;
  members(): readonly MemberRecord[];
  /** The pid a pause stops (this process). */
  pid: number;
  /** Cuts TCP ports for `seconds` (drill-nft.ts; a fake in tests). */
  isolate?: (ports: readonly number[], seconds: number) => Promise<void>;
  /** Starts the detached pause helper (a fake in tests). */
  spawnPauser?: (pid: number, seconds: number) => void;
  /** Makes this node's next start wait until `seconds` from now (drill-hold.ts); where it wrote that. */
  holdNextStart(seconds: number): string;
}

/** The exit code of `kill` (src/cli/args.ts exitCodes.restartRequested): restarted by every service manager. */
export const restartExitCode = 10;
/** The answer leaves before a kill or a pause takes effect. */
const actDelayMs = 200;

export interface DrillOutcome {
  action: DrillAction['action'];
  seconds: number | null;
  /** The TCP ports an isolate cut. */
  ports: number[];
  message: string;
}

/**
 * The ports to cut. On loopback (a cluster of processes on one machine) only this node's own
 * peer port: every node shares the interface, so cutting the other members' ports would cut them
 * from each other too. There the node's inbound links drop; its outbound links stay up, but what
 * comes back (acks, votes) travels on the peers' inbound ones and is lost. A node on its own
 * machine drops its own peer port and every member's peer port: all its peer links, both ways.
 */
export function portsToCut(peerListen: string, members: readonly MemberRecord[]): number[] {
  const own = splitHostPort(peerListen);
  const loopback = own.host === 'localhost' || own.host.startsWith('127.') || own.host.replace(/[[\]]/g, '') === '::1';
  if (loopback) return [own.port];
  const ports = new Set([own.port]);
  for (const m of members) ports.add(splitHostPort(m.peerAddress).port);
  return [...ports].sort((a, b) => a - b);
}

/** Runs the helper that stops and resumes `pid`; it outlives nothing it needs (detached, its own group). */
export function spawnPauser(pid: number, seconds: number): void {
  // A SIGTERM or SIGINT of the helper resumes the node first: a killed helper must not leave it stopped.
  const script = `const pid=Number(process.argv[1]),ms=Number(process.argv[2]),go=()=>{try{process.kill(pid,'SIGCONT')}catch{}process.exit(0)};
process.on('SIGTERM',go);process.on('SIGINT',go);
setTimeout(()=>{try{process.kill(pid,'SIGSTOP')}catch{process.exit(1)}setTimeout(go,ms)},${actDelayMs});`;
  let child;
  try {
    child = spawn(process.execPath, ['-e', script, String(pid), String(Math.round(seconds * 1000))], { detached: true, stdio: 'ignore' });
  } catch (err) {
    throw new ShoalError('drill_action_failed', `could not start the pause helper: ${(err as Error).message}; nothing was changed`);
  }
  child.on('error', () => undefined);
  child.unref();
}

/** Carries out `a` on `t`; a kill or a pause takes effect just after this resolves (the answer goes first). */
export async function runDrillAction(t: DrillTarget, a: DrillAction): Promise<DrillOutcome> {
  switch (a.action) {
    case 'kill':
      setTimeout(() => t.exit(restartExitCode), actDelayMs);
      return { action: a.action, seconds: null, ports: [], message: `exiting with code ${restartExitCode} in ${actDelayMs} ms; the service manager starts the node again` };
    case 'isolate': {
      const ports = portsToCut(t.peerListen, t.members());
      await (t.isolate ?? isolatePorts)(ports, a.seconds);
      return { action: a.action, seconds: a.seconds, ports, message: `peer ports ${ports.join(', ')} dropped for ${a.seconds} s (nft table inet shoal_drill)` };
    }
    case 'reboot': {
      let file: string;
      try {
        file = t.holdNextStart(a.seconds);
      } catch (err) {
        throw new ShoalError('drill_action_failed', `could not write the hold of the next start: ${(err as Error).message}; nothing was changed`);
      }
      setTimeout(() => t.exit(restartExitCode), actDelayMs);
      return {
        action: a.action, seconds: a.seconds, ports: [],
        message: `exiting with code ${restartExitCode} in ${actDelayMs} ms; the next start waits until ${a.seconds} s from now (${file})`,
      };
    }
    case 'pause':
      (t.spawnPauser ?? spawnPauser)(t.pid, a.seconds);
      return { action: a.action, seconds: a.seconds, ports: [], message: `a helper stops this process (SIGSTOP) in ${actDelayMs} ms and resumes it (SIGCONT) ${a.seconds} s later` };
    case 'disk-stall':
      t.stallDisk(a.seconds * 1000);
      return { action: a.action, seconds: a.seconds, ports: [], message: `every durable write waits until ${a.seconds} s from now` };
  }
}
