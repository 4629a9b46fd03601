// CA rotation as data: the record every node follows (`shoal.ca-rotation/current`), the reports
// each node writes about itself (`shoal.ca-rotation-nodes/<id>`), and the pure decision of whether
// the rotation may move to its next phase. Phases (docs/security.md, "Rotating the CA"):
//   add      every node trusts {old, new}; voters fetch the new CA key as they did the old one
//   reissue  every node renews its certificate under the new CA, serving the cross-signed
//            certificate in its chain so a peer or client that trusts only the old CA accepts it
//   retire   every node trusts {new} only; the old CA key is deleted; tokens pin the new CA
//   done     every node reported the retire phase: nothing left to do
// Nodes follow the record level-triggered (ca-rotation-agent.ts), so each phase is idempotent
// and a crash of any node, the leader included, resumes where the record says.

import { z } from 'zod';
import { certFingerprint } from './ca-bundle.ts';

export const caRotationCollection = 'shoal.ca-rotation';
export const caRotationDocId = 'current';
export const caRotationNodesCollection = 'shoal.ca-rotation-nodes';
export const caPhases = ['add', 'reissue', 'retire', 'done'] as const;
export type CaPhase = (typeof caPhases)[number];
/** Fingerprints of retired CAs kept, to tell a token made before a rotation from another cluster's. */
export const retiredFingerprintsMax = 16;

const pemCert = z.string().min(1).max(16 * 1024).regex(/-----BEGIN CERTIFICATE-----/);
const fingerprint = z.string().regex(/^[0-9a-f]{64}$/);

export const caRotationSchema = z.object({
  id: z.string().regex(/^[0-9a-f]{16}$/),
  phase: z.enum(caPhases),
  oldCaPem: pemCert,
  newCaPem: pemCert,
  /** The new CA's key certified by the old CA (self-issued: same subject), served in chains during reissue. */
  crossPem: pemCert,
  startedBy: z.string().max(200),
  startedAtMs: z.number().int(),
  phaseAtMs: z.number().int(),
  retiredFingerprints: z.array(fingerprint).max(retiredFingerprintsMax),
}).strict();
export type CaRotation = z.infer<typeof caRotationSchema>;

export const caNodeReportSchema = z.object({
  rotation: z.string(),
  /** Fingerprints of the CAs this node trusts, in its bundle's order. */
  bundle: z.array(fingerprint).max(4),
  /** Fingerprint of the CA that issued this node's certificate; null when none it knows. */
  certCa: fingerprint.nullable(),
  holdsNewKey: z.boolean(),
  holdsOldKey: z.boolean(),
}).strict();
export type CaNodeReport = z.infer<typeof caNodeReportSchema>;

/** The CA certificates a node trusts in `phase`, the one join tokens pin first. */
export function bundleFor(r: Pick<CaRotation, 'phase' | 'oldCaPem' | 'newCaPem'>): string[] {
  return r.phase === 'add' || r.phase === 'reissue' ? [r.oldCaPem, r.newCaPem] : [r.newCaPem];
}

export function nextPhase(phase: CaPhase): CaPhase {
  const i = caPhases.indexOf(phase);
  return caPhases[Math.min(i + 1, caPhases.length - 1)] ?? 'done';
}

export interface Waiting {
  id: string;
  name: string;
  /** What the member has not done yet, in words. */
  why: string;
}

/** Why `m` is not ready to leave `r.phase`; undefined when it is. */
function memberWaits(r: CaRotation, newFp: string, voter: boolean, report: CaNodeReport | undefined): string | undefined {
  if (report === undefined || report.rotation !== r.id) return 'has not reported on this rotation yet';
  switch (r.phase) {
    case 'add':
      if (!report.bundle.includes(newFp)) return 'does not trust the new CA yet';
      return voter && !report.holdsNewKey ? 'is a voter and does not hold the new CA key yet' : undefined;
    case 'reissue':
      return report.certCa === newFp ? undefined : 'has no certificate from the new CA yet';
    case 'retire':
      if (report.bundle.length !== 1 || report.bundle[0] !== newFp) return 'still trusts the old CA';
      return report.holdsOldKey ? 'still holds the old CA key' : undefined;
    case 'done':
      return undefined;
  }
}

/** Members that keep the rotation in its phase, and why; empty: it may move on. */
export function waitingMembers(r: CaRotation, members: ReadonlyArray<{ id: string; name: string }>, voters: ReadonlyArray<string>, reports: ReadonlyMap<string, CaNodeReport>): Waiting[] {
  const newFp = certFingerprint(r.newCaPem);
  const waiting: Waiting[] = [];
  for (const m of members) {
    const why = memberWaits(r, newFp, voters.includes(m.id), reports.get(m.id));
    if (why !== undefined) waiting.push({ id: m.id, name: m.name, why });
  }
  return waiting;
}

/** The retired fingerprints after retiring `oldFp`, newest last, bounded. */
export function withRetired(list: ReadonlyArray<string>, oldFp: string): string[] {
  return [...list.filter((f) => f !== oldFp), oldFp].slice(-retiredFingerprintsMax);
}
