// The leader's side of `shoal ca rotate`: start a rotation (a new CA made here, from the CA key
// this leader holds) and move it one phase on once every member has reported the current one
// done. Each call reads the committed record and writes the next one as a compare-and-set on its
// revision, so two admins at once, or a call repeated after a crash, cannot skip a phase.

import { randomBytes } from 'node:crypto';
import { encodeCommand, type DocumentStore } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/index.ts';
import { ShoalError } from '../errors.ts';
import type { MembershipView } from '../ports/membership-view.ts';
import type { Proposer } from '../ports/proposer.ts';
import type { ReadBarrier } from '../ports/read-barrier.ts';
import type { CaAuthority } from './authority.ts';
import { certFingerprint, splitPem } from './ca-bundle.ts';
import {
  caNodeReportSchema, caRotationCollection, caRotationDocId, caRotationNodesCollection, nextPhase, waitingMembers, withRetired,
  type CaNodeReport, type CaPhase, type CaRotation, type Waiting,
} from './ca-rotation.ts';
import { caNextKeyFile, readOwnRotation, readRotation } from './ca-rotation-authority.ts';
import { writeKeyFile } from './key-vault.ts';

export interface RotationView {
  id: string;
  phase: CaPhase;
  oldFingerprint: string;
  newFingerprint: string;
  startedBy: string;
  startedAtMs: number;
  phaseAtMs: number;
  /** Members that keep the rotation in its phase, and why (empty once done). */
  waiting: Waiting[];
}

export interface RotationStep {
  rotation: RotationView | null;
  /** What this call did: started a rotation, moved it on, or nothing (still waiting, or done). */
  did: 'started' | 'advanced' | 'nothing';
}

interface DriverPorts {
  node: Proposer & ReadBarrier & MembershipView;
  store: DocumentStore;
  authority: CaAuthority;
  dataDir: string;
}

export function reportsOf(store: DocumentStore): Map<string, CaNodeReport> {
  const reports = new Map<string, CaNodeReport>();
  for (const d of store.list(caRotationNodesCollection).items) {
    const parsed = caNodeReportSchema.safeParse(d.doc);
    if (parsed.success) reports.set(d.id, parsed.data);
  }
  return reports;
}

export function viewOf(p: Pick<DriverPorts, 'node' | 'store'>, r: CaRotation): RotationView {
  const members = p.node.membership.list();
  const waiting = r.phase === 'done' ? [] : waitingMembers(r, members, p.node.confState().voters, reportsOf(p.store));
  return {
    id: r.id, phase: r.phase, oldFingerprint: certFingerprint(r.oldCaPem), newFingerprint: certFingerprint(r.newCaPem),
    startedBy: r.startedBy, startedAtMs: r.startedAtMs, phaseAtMs: r.phaseAtMs, waiting,
  };
}

async function write(p: DriverPorts, r: CaRotation, expect: { rev: number } | { absent: true }, principal: string): Promise<void> {
  const cmd = { op: 'put' as const, collection: caRotationCollection, id: caRotationDocId, doc: r, expect };
  const { result } = await p.node.propose(encodeCommand({ cmd, ts: Date.now(), principal }));
  const res = result as CommandResult;
  if (!res.ok) {
    throw new ShoalError('revision_mismatch', `the CA rotation record changed while this request moved it (${res.error.message}); nothing was skipped, run the command again`, { collection: caRotationCollection });
  }
}

async function start(p: DriverPorts, previous: { rev: number } | undefined, retiredFingerprints: string[], principal: string): Promise<CaRotation> {
  const signer = p.authority.signer();
  const trusted = splitPem(p.authority.caPem);
  if (signer === undefined || trusted.length !== 1) {
    throw new ShoalError('ca_key_unavailable', `this leader (${p.node.id}) does not hold the cluster CA key; retry when a voter that holds it leads`);
  }
  const { createRolloverCa } = await import('./ca-rollover.ts');
  const next = await createRolloverCa(signer);
  // The key is on this voter before the record names the new CA: the others fetch it from here.
  writeKeyFile(caNextKeyFile(p.dataDir), next.ca.keyPem);
  const now = Date.now();
  const r: CaRotation = {
    id: randomBytes(8).toString('hex'), phase: 'add', oldCaPem: signer.certPem, newCaPem: next.ca.certPem, crossPem: next.crossPem,
    startedBy: principal, startedAtMs: now, phaseAtMs: now, retiredFingerprints,
  };
  await write(p, r, previous === undefined ? { absent: true } : { rev: previous.rev }, principal);
  return r;
}

/** One step of the rotation, on the leader, after a read barrier. */
export async function rotateStep(p: DriverPorts, principal: string): Promise<RotationStep> {
  await p.node.readBarrier();
  const current = readRotation(p.store);
  // A record about CAs this cluster never trusted (a restored store's) is replaced, not followed.
  const own = readOwnRotation(p.store, p.authority.caPem);
  if (own === undefined || own.rotation.phase === 'done') {
    const r = await start(p, current, own?.rotation.retiredFingerprints ?? [], principal);
    return { rotation: viewOf(p, r), did: 'started' };
  }
  const r = own.rotation;
  const view = viewOf(p, r);
  if (view.waiting.length > 0) return { rotation: view, did: 'nothing' };
  const phase = nextPhase(r.phase);
  const moved: CaRotation = {
    ...r, phase, phaseAtMs: Date.now(),
    ...(phase === 'retire' ? { retiredFingerprints: withRetired(r.retiredFingerprints, certFingerprint(r.oldCaPem)) } : {}),
  };
  await write(p, moved, { rev: own.rev }, principal);
  return { rotation: viewOf(p, moved), did: 'advanced' };
}
