// Every node follows the CA rotation record (ca-rotation.ts) toward what its phase asks, level-
// triggered: at each change of the record or of the nodes' reports (and every caRotationSweepMs
// besides) it compares what it has with what the phase wants and does the next step, so a node
// that was down, or restarted mid-step, catches up by itself.
//   trust    ca.crt and the TLS contexts hold the phase's bundle ({old, new}, then {new})
//   key      a voter fetches the new CA key (sealed to its certificate, as the CA key is) and,
//            at retire, puts it in place of the old one, which is gone from the disk
//   cert     from reissue on, the node renews its certificate under the new CA (renewal.ts)
//   report   it writes what it has to shoal.ca-rotation-nodes/<id>, which the leader waits on

import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ChangeWake, encodeCommand, type DocumentStore } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import type { Tls } from '../base/tls-material.ts';
import type { Proposer } from '../ports/proposer.ts';
import { caCertFile, caKeyFile } from './authority.ts';
import { bundleFingerprints, certFingerprint, issuerIn, joinPem, leafOf, splitPem } from './ca-bundle.ts';
import { keyMatchesCert } from './ca-key-fetcher.ts';
import { bundleFor, caNodeReportSchema, caRotationCollection, caRotationNodesCollection, type CaNodeReport, type CaRotation } from './ca-rotation.ts';
import { caNextKeyFile, heldKeyFor, readOwnRotation } from './ca-rotation-authority.ts';
import { addressesLeaderFirst, nodeCall } from './node-client.ts';
import { openWithKey, sealedBoxSchema } from './sealed-box.ts';
import { readKeyFile, removeKeyFile, writeKeyFile } from './key-vault.ts';

/** A pass this often whatever changed: for what no event announces (this node's certificate renewed, a key file replaced). */
export const caRotationSweepMs = 10_000;
/** A failed renewal or key fetch is tried again after this long. */
export const caRotationRetryMs = 5_000;
const nextKeyAnswer = z.object({ sealed: sealedBoxSchema }).strict();

export interface CaRotationAgentOptions {
  dataDir: string;
  nodeId: string;
  tls: Tls;
  store: DocumentStore;
  node: Proposer;
  log: Logger;
  scheme: 'http' | 'https';
  isVoter: () => boolean;
  members: () => { list: ReadonlyArray<{ id: string; apiAddress: string }>; leader: string };
  /** Renews this node's certificate now (renewal.ts); the TLS contexts reload through its own hook. */
  renew: () => Promise<void>;
  /** The bundle or the node's chain changed: the transport, node-to-node HTTP and the API take it. */
  reloadTls: () => void;
  /** ca.key was replaced or deleted (the CA key fetcher may have to run again). */
  onCaKeyChanged: () => void;
  /** The new CA key arrived from `from` (the node records itself as a holder). */
  onNextKeyReceived?: (from: string) => void;
}

function writeAtomic(file: string, text: string, mode: number): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, file);
}

export class CaRotationAgent {
  private readonly wake: ChangeWake;
  private busy = false;
  /** When a failed step may be tried again (ms since the epoch), by step. */
  private readonly retryAt = new Map<string, number>();

  constructor(private readonly o: CaRotationAgentOptions) {
    this.wake = new ChangeWake({ store: o.store, collections: [caRotationCollection, caRotationNodesCollection], sweepMs: caRotationSweepMs, run: () => this.reconcile() });
  }

  start(): void {
    this.wake.start();
  }

  close(): void {
    this.wake.close();
  }

  /** One pass; tests call it directly. Never throws: a failed step is logged and retried later. */
  async reconcile(): Promise<void> {
    if (this.busy) return;
    const r = readOwnRotation(this.o.store, this.o.tls.caPem)?.rotation;
    if (r === undefined) return;
    this.busy = true;
    try {
      this.maybeTrust(r);
      await this.step('key', () => this.maybeKey(r));
      await this.step('cert', () => this.maybeRenew(r));
      await this.step('report', () => this.maybeReport(r));
    } finally {
      this.busy = false;
    }
  }

  private async step(name: string, run: () => Promise<void>): Promise<void> {
    if ((this.retryAt.get(name) ?? 0) > Date.now()) return;
    try {
      await run();
    } catch (err) {
      this.retryAt.set(name, Date.now() + caRotationRetryMs);
      this.wake.retryIn(caRotationRetryMs);
      this.o.log.warn(`CA rotation: ${name} step failed (${(err as Error).message}); trying again in ${caRotationRetryMs / 1000} s`);
    }
  }

  /** The bundle of the phase in ca.crt and in the TLS contexts; after retire, no rollover certificate in the chain. */
  private maybeTrust(r: CaRotation): void {
    const tls = this.o.tls;
    const bundle = joinPem(bundleFor(r));
    let changed = false;
    if (tls.caPem !== bundle) {
      writeAtomic(caCertFile(this.o.dataDir), bundle, 0o644);
      tls.caPem = bundle;
      changed = true;
      this.o.log.info(`CA rotation ${r.id} (${r.phase}): this node now trusts ${bundleFingerprints(bundle).map((f) => f.slice(0, 12)).join(' and ')}`);
    }
    if ((r.phase === 'retire' || r.phase === 'done') && splitPem(tls.certPem).length > 1) {
      const leaf = joinPem([leafOf(tls.certPem)]);
      writeAtomic(path.join(this.o.dataDir, 'tls', 'node.crt'), leaf, 0o644);
      tls.certPem = leaf;
      changed = true;
    }
    if (changed) this.o.reloadTls();
  }

  private async maybeKey(r: CaRotation): Promise<void> {
    const dir = this.o.dataDir;
    if (r.phase === 'retire' || r.phase === 'done') {
      const held = heldKeyFor(dir, r.newCaPem);
      const current = heldKeyFor(dir, r.oldCaPem);
      if (held !== undefined && !keyMatchesCertSafe(caKeyFile(dir), r.newCaPem)) {
        writeKeyFile(caKeyFile(dir), held);
        this.o.log.info(`CA rotation ${r.id}: the old CA key is deleted; this voter signs with the new CA`);
        this.o.onCaKeyChanged();
      } else if (held === undefined && current !== undefined) {
        removeKeyFile(caKeyFile(dir));
        this.o.log.info(`CA rotation ${r.id}: the old CA key is deleted`);
        this.o.onCaKeyChanged();
      }
      removeKeyFile(caNextKeyFile(dir));
      return;
    }
    if (!this.o.isVoter() || heldKeyFor(dir, r.newCaPem) !== undefined) return;
    await this.fetchNextKey(r);
  }

  private async fetchNextKey(r: CaRotation): Promise<void> {
    const { list, leader } = this.o.members();
    const errors: string[] = [];
    for (const addr of addressesLeaderFirst(list, leader, this.o.nodeId)) {
      try {
        const answer = await nodeCall(addr, '/v1/ca/next-key', { nodeId: this.o.nodeId, certPem: this.o.tls.certPem, rotation: r.id }, nextKeyAnswer, { scheme: this.o.scheme, caPem: this.o.tls.caPem });
        const keyPem = openWithKey(this.o.tls.keyPem, answer.sealed);
        if (!keyMatchesCert(keyPem, r.newCaPem)) throw new Error('the key it sent is not the new CA\'s');
        writeKeyFile(caNextKeyFile(this.o.dataDir), keyPem);
        this.o.log.info(`CA rotation ${r.id}: received the new CA key from ${addr}`);
        this.o.onNextKeyReceived?.(addr);
        return;
      } catch (err) {
        errors.push(`${addr}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no member gave the new CA key (${errors.join('; ') || 'no other member'})`);
  }

  private async maybeRenew(r: CaRotation): Promise<void> {
    if (r.phase === 'add' || issuerIn(this.o.tls.certPem, r.newCaPem) !== undefined) return;
    await this.o.renew();
  }

  private async maybeReport(r: CaRotation): Promise<void> {
    const want = this.reportOf(r);
    const d = this.o.store.get(caRotationNodesCollection, this.o.nodeId);
    const have = d === undefined ? undefined : caNodeReportSchema.safeParse(d.doc).data;
    if (have !== undefined && JSON.stringify(have) === JSON.stringify(want)) return;
    const cmd = { op: 'put' as const, collection: caRotationNodesCollection, id: this.o.nodeId, doc: want };
    await this.o.node.propose(encodeCommand({ cmd, ts: Date.now(), principal: 'shoal' }));
  }

  private reportOf(r: CaRotation): CaNodeReport {
    const issuer = issuerIn(this.o.tls.certPem, joinPem([r.oldCaPem, r.newCaPem]));
    return {
      rotation: r.id,
      bundle: bundleFingerprints(this.o.tls.caPem),
      certCa: issuer === undefined ? null : certFingerprint(issuer),
      holdsNewKey: heldKeyFor(this.o.dataDir, r.newCaPem) !== undefined,
      holdsOldKey: heldKeyFor(this.o.dataDir, r.oldCaPem) !== undefined,
    };
  }
}

function keyMatchesCertSafe(file: string, certPem: string): boolean {
  try {
    const keyPem = readKeyFile(file);
    return keyPem !== undefined && keyMatchesCert(keyPem, certPem);
  } catch {
    return false;
  }
}
