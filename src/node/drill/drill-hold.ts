// node-reboot's "the machine is off" (docs/operations.md, "Failover drills"): the node writes
// DATA/drill-hold.json with the time its outage ends, then exits asking to be restarted; its
// next `shoal serve` waits until that time before it opens anything, then removes the file. So
// the node is absent for the whole --duration, as a machine that is off: it sends nothing, and
// past the leader's control.restartGraceMs (its machine still refuses the peer port, which node
// health reads as a restart) it is declared down and its tasks are replaced. (An
// isolated process that its service manager restarts at once still talks: on loopback its
// outbound links, which the cut does not cover, carry its vote requests, and a leader that hears
// them never finds it silent.) The hold is never longer than a drill's longest fault, whatever
// the file says (a clock that jumped, a file edited by hand).

import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { drillSecondsMax } from './drill-actions.ts';

export const drillHoldFileName = 'drill-hold.json';

const holdSchema = z.strictObject({ untilMs: z.number().int().min(0), drill: z.string().max(100) });

export function drillHoldFile(dataDir: string): string {
  return path.join(dataDir, drillHoldFileName);
}

/** Makes the next start of the node of `dataDir` wait until `untilMs` (wall clock). */
export function writeDrillHold(dataDir: string, untilMs: number, drill: string): void {
  const file = drillHoldFile(dataDir);
  writeFileSync(`${file}.tmp`, `${JSON.stringify({ untilMs: Math.round(untilMs), drill })}\n`);
  renameSync(`${file}.tmp`, file);
}

/** How long a start must still wait for a hold written as `text`, at `nowMs`: 0 when none applies. */
export function holdLeftMs(text: string, nowMs: number): number {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 0;
  }
  const hold = holdSchema.safeParse(parsed);
  if (!hold.success) return 0;
  return Math.max(0, Math.min(hold.data.untilMs - nowMs, drillSecondsMax * 1000));
}

export interface HoldPorts {
  now(): number;
  sleep(ms: number): Promise<void>;
  log: { info(msg: string): void; warn(msg: string): void };
}

const realPorts = (log: HoldPorts['log']): HoldPorts => ({ now: () => Date.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)), log });

/** Waits out a drill's hold on `dataDir`, if any, then removes it; what the node does before it starts. */
export async function waitOutDrillHold(dataDir: string, log: HoldPorts['log'], ports: HoldPorts = realPorts(log)): Promise<void> {
  const file = drillHoldFile(dataDir);
  if (!existsSync(file)) return;
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    ports.log.warn(`could not read ${file} (${(err as Error).message}); starting now`);
  }
  const leftMs = holdLeftMs(text, ports.now());
  if (leftMs > 0) {
    ports.log.info(`a drill (node-reboot) keeps this node off for ${(leftMs / 1000).toFixed(1)} s more; to start at once, stop it, remove ${file} and start it again`);
    await ports.sleep(leftMs);
  }
  rmSync(file, { force: true });
}
