// Every node follows the keyring (src/resources/cluster-keyring.ts) toward what it asks of it,
// level-triggered (docs/security.md, "Secrets at rest"): a pass at each change of the keyring or
// of the holders' reports, when this node is unlocked, when it becomes or stops being a voter, and
// every clusterKeySweepMs besides:
//
//   fetch    a voter that lacks a key of the keyring asks the members for it (the leader first:
//            POST /v1/keyring/cluster-key over mTLS), sealed to its own certificate, checks that
//            it is the private half of the keyring's public key, and keeps it
//   retire   a key the keyring retired (a finished rotation) is deleted from the disk
//   autolock with autolock on, the keys on disk are sealed with the unlock key (fetched from an
//            unlocked peer, sealed to this node's certificate), and with it off written back in
//            the clear; a locked node waits for `shoal unlock` (or, with secrets.peerUnlock, for
//            a peer that hands it the unlock key)
//   report   what it holds goes to shoal.cluster-key-holders/<id>: a rotation waits for it

import { createPublicKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { ChangeWake, encodeCommand, type DocumentStore } from '../../../fsm/index.ts';
import type { JsonObject } from '../../../fsm/types.ts';
import { featureLevelSecretsAtRest } from '../../base/feature-level.ts';
import type { Tls } from '../../base/tls-material.ts';
import type { Logger } from '../../log.ts';
import type { Leadership } from '../../ports/leadership.ts';
import type { MembershipView } from '../../ports/membership-view.ts';
import type { Proposer } from '../../ports/proposer.ts';
import { clusterKeyHoldersCollection, clusterKeysCollection, keyHoldingSchema, readKeyring, unlockKeyIdOf, type KeyHolding, type Keyring } from '../../resources/cluster-keyring.ts';
import { privateKeyOf, rawPublicKey } from '../../resources/secret-crypto.ts';
import type { ClusterKeyHolder, NodeKeyLock } from '../../ports/cluster-keys.ts';
import { addressesLeaderFirst } from '../../security/node-client.ts';
import { openWithKey, sealedBoxSchema } from '../../security/sealed-box.ts';

/** A pass this often whatever changed: for what no event announces (a feature level raised, a failed report). */
export const clusterKeySweepMs = 10_000;
/** A failed fetch is tried again after this long. */
export const clusterKeyRetryMs = 3_000;

const sealedAnswer = z.object({ sealed: sealedBoxSchema }).loose();

export interface ClusterKeyAgentOptions {
  nodeId: string;
  store: DocumentStore;
  node: Proposer & Pick<MembershipView, 'confState'> & { readonly featureLevel: number } & Partial<Pick<Leadership, 'on' | 'off'>>;
  keys: ClusterKeyHolder;
  /** Autolock on this node (absent: keys in memory, for tests; no autolock). */
  lock?: NodeKeyLock;
  tls: Tls;
  log: Logger;
  members: () => { list: ReadonlyArray<{ id: string; apiAddress: string }>; leader: string };
  /** POSTs `body` to a member's API over node-to-node HTTP (mTLS); the parsed answer, or a throw naming its error. */
  call: (addr: string, path: string, body: unknown) => Promise<unknown>;
  /** secrets.peerUnlock: a locked node asks its unlocked peers for the unlock key. */
  peerUnlock: boolean;
  /** Told on each pass that finds a keyring in the store (a founding keyring prepared here is then superseded). */
  onKeyring?: () => void;
}

export class ClusterKeyAgent {
  private readonly wake: ChangeWake;
  private busy = false;
  private retryAt = 0;
  private wasVoter: boolean | undefined;
  private offUnlocked: () => void = () => {};
  private readonly logged = new Set<string>();
  /** Membership changes come as applied entries: a pass when this node's part in it changed. */
  private readonly onApplied = (): void => {
    let voter: boolean;
    try {
      voter = this.isVoter();
    } catch {
      return; // A halted node: the server closes this agent.
    }
    if (voter !== this.wasVoter) this.wake.kick();
    this.wasVoter = voter;
  };

  constructor(private readonly o: ClusterKeyAgentOptions) {
    this.wake = new ChangeWake({ store: o.store, collections: [clusterKeysCollection, clusterKeyHoldersCollection], sweepMs: clusterKeySweepMs, run: () => this.reconcile() });
  }

  start(): void {
    this.o.node.on?.('applied', this.onApplied);
    this.o.node.on?.('featureLevel', this.wake.kick);
    this.offUnlocked = this.o.lock?.onUnlocked?.(() => this.wake.kick()) ?? (() => {});
    this.wake.start();
  }

  close(): void {
    this.wake.close();
    this.offUnlocked();
    this.o.node.off?.('applied', this.onApplied);
    this.o.node.off?.('featureLevel', this.wake.kick);
  }

  /** One pass; tests call it. Never throws: a failed step is logged once and tried again later. */
  async reconcile(): Promise<void> {
    if (this.busy || this.o.node.featureLevel < featureLevelSecretsAtRest) return;
    const keyring = readKeyring(this.o.store)?.keyring;
    if (keyring === undefined) return;
    this.o.onKeyring?.();
    this.busy = true;
    try {
      this.retire(keyring);
      if (Date.now() >= this.retryAt) {
        try {
          await this.autolock(keyring);
          await this.fetchMissing(keyring);
        } catch (err) {
          this.retryAt = Date.now() + clusterKeyRetryMs;
          this.wake.retryIn(clusterKeyRetryMs);
          this.warnOnce((err as Error).message);
        }
      }
      await this.report(keyring).catch((err: unknown) => {
        this.o.log.debug(`cluster keys: reporting what this node holds failed: ${(err as Error).message}`);
        this.wake.retryIn(clusterKeyRetryMs);
      });
    } finally {
      this.busy = false;
    }
  }

  private isVoter(): boolean {
    return this.o.node.confState().voters.includes(this.o.nodeId);
  }

  private retire(keyring: Keyring): void {
    const held = new Set(this.o.keys.heldIds());
    for (const id of keyring.retired) {
      if (!held.has(id)) continue;
      this.o.keys.remove(id);
      this.o.log.info(`cluster keys: deleted retired cluster key ${id}`);
    }
  }

  private async fetchMissing(keyring: Keyring): Promise<void> {
    if (!this.isVoter() || this.locked()) return;
    // Under autolock a key is kept only sealed: not before this node has the unlock key.
    if (keyring.autolock !== null && this.o.lock?.heldUnlockKey() === undefined) return;
    const held = new Set(this.o.keys.heldIds());
    for (const k of keyring.keys) {
      if (held.has(k.id)) continue;
      const key = await this.fetchKey(k.id, k.publicKey);
      this.o.keys.add(k.id, key);
      this.o.log.info(`cluster keys: received cluster key ${k.id}; this voter can decrypt the secrets wrapped by it`);
    }
  }

  private async askMembers<T>(what: string, ask: (addr: string) => Promise<T>): Promise<T> {
    const { list, leader } = this.o.members();
    const problems: string[] = [];
    for (const addr of addressesLeaderFirst(list, leader, this.o.nodeId)) {
      try {
        return await ask(addr);
      } catch (err) {
        problems.push(`${addr}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no member gave ${what} (${problems.join('; ') || 'no other member'})`);
  }

  private fetchKey(id: string, publicKey: string): Promise<KeyObject> {
    return this.askMembers(`cluster key ${id}`, async (addr) => {
      const answer = sealedAnswer.parse(await this.o.call(addr, '/v1/keyring/cluster-key', { nodeId: this.o.nodeId, certPem: this.o.tls.certPem, keyId: id }));
      const key = privateKeyOf(Buffer.from(openWithKey(this.o.tls.keyPem, answer.sealed), 'base64'));
      if (!rawPublicKey(createPublicKey(key)).equals(Buffer.from(publicKey, 'base64'))) throw new Error(`the key it sent is not cluster key ${id}`);
      return key;
    });
  }

  private locked(): boolean {
    return this.o.lock?.locked ?? this.o.keys.locked;
  }

  /**
   * Under autolock, every key on this voter's disk is sealed with the cluster's unlock key (asked
   * of an unlocked peer the first time, and after `shoal cluster autolock on` made a new one); with
   * autolock off, they are written back in the clear. A locked node waits to be unlocked, or asks
   * its peers for the unlock key when secrets.peerUnlock says so.
   */
  private async autolock(keyring: Keyring): Promise<void> {
    const lock = this.o.lock;
    if (lock === undefined || !this.isVoter()) return;
    const want = keyring.autolock?.unlockKeyId ?? null;
    const held = lock.heldUnlockKey();
    if (want === null) {
      if (held !== undefined || lock.locked) {
        if (lock.locked) return; // Written back in the clear once someone unlocks it.
        lock.autolock(null);
        this.o.log.info('autolock is off: this node\'s keys are on its disk in the clear again (mode 0600)');
      }
      return;
    }
    if (held !== undefined && unlockKeyIdOf(held) === want) return;
    if (lock.locked && !this.o.peerUnlock) {
      this.infoOnce(`this node is autolocked: it serves the store, but decrypts no secret and signs no certificate until it is unlocked: shoal unlock --addr ${this.selfAddress()} (or set secrets.peerUnlock to let an unlocked voter unlock it)`);
      return;
    }
    const unlockKey = await this.askMembers('the unlock key', async (addr) => {
      const answer = sealedAnswer.parse(await this.o.call(addr, '/v1/keyring/unlock-key', { nodeId: this.o.nodeId, certPem: this.o.tls.certPem }));
      const key = Buffer.from(openWithKey(this.o.tls.keyPem, answer.sealed), 'base64');
      if (unlockKeyIdOf(key) !== want) throw new Error('it holds another unlock key than the keyring names (not caught up yet)');
      return key;
    });
    if (lock.locked) {
      lock.unlock(unlockKey);
      this.o.log.info('unlocked by a peer (secrets.peerUnlock): this node decrypts secrets and signs certificates again');
    } else {
      lock.autolock(unlockKey);
      this.o.log.info(`autolock: this node's keys are sealed on its disk with unlock key ${want}; after a restart it needs shoal unlock`);
    }
  }

  private selfAddress(): string {
    return this.o.members().list.find((m) => m.id === this.o.nodeId)?.apiAddress ?? 'THIS_NODE';
  }

  private infoOnce(message: string): void {
    if (this.logged.has(message)) return;
    this.logged.add(message);
    this.o.log.warn(message);
  }

  private async report(keyring: Keyring): Promise<void> {
    const inKeyring = new Set(keyring.keys.map((k) => k.id));
    const held = this.o.keys.heldIds().filter((id) => inKeyring.has(id));
    if (!this.isVoter() && held.length === 0) return;
    const want: KeyHolding = { keys: held, locked: this.locked() };
    const d = this.o.store.get(clusterKeyHoldersCollection, this.o.nodeId);
    const have = d === undefined ? undefined : keyHoldingSchema.safeParse(d.doc).data;
    if (have !== undefined && JSON.stringify(have) === JSON.stringify(want)) return;
    const cmd = { op: 'put' as const, collection: clusterKeyHoldersCollection, id: this.o.nodeId, doc: want as unknown as JsonObject };
    await this.o.node.propose(encodeCommand({ cmd, ts: Date.now(), principal: 'shoal' }), { featureLevel: featureLevelSecretsAtRest });
  }

  private warnOnce(message: string): void {
    if (this.logged.has(message)) return;
    this.logged.add(message);
    this.o.log.warn(`cluster keys: ${message}; trying again`);
  }
}
