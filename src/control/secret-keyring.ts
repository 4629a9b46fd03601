// The leader's keyring loop (docs/security.md, "Secrets at rest"). On the leader, once the
// cluster runs at feature level 6 and the leader has applied an entry of its own term, each pass
// re-reads the keyring and the secrets and does the next thing left to do, one step at a time:
//
//   create    no keyring yet: make a cluster key here (its private half written to this voter's
//             disk before the keyring names it; the other voters fetch it, sealed to their
//             certificates), or take the one `shoal init` prepared, and write the keyring
//   seal      a secret still in the clear (written before level 6): encrypt it under the active
//             key (the public half is enough), same version, digest and times
//   scrub     once none is left in the clear: compact the store's watch events (they still hold
//             the plain records) and set `scrubbedAt`, after which every node rewrites its log and
//             snapshot files without them (src/node/secret-purge.ts)
//   rotate    `shoal secret rotate-key`: wait until every voter holds the new key, make it the
//             active one, re-wrap each data key under it (the values' ciphertexts do not change),
//             then retire the old key
//
// Every write is a compare-and-set on what the pass read, fenced by the leader's term, so a
// deposed leader's late write changes nothing, and a step cut short by a crash or a change of
// leader is done by the next pass, wherever it runs.

import type { KeyObject } from 'node:crypto';
import { encodeCommand, type DocumentStore } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import type { Command, Op } from '../../fsm/command-types.ts';
import { featureLevelSecretsAtRest } from '../base/feature-level.ts';
import type { Logger } from '../log.ts';
import type { ClusterKeyHolder } from '../ports/cluster-keys.ts';
import type { Leadership, LeaderLog } from '../ports/leadership.ts';
import type { MembershipView } from '../ports/membership-view.ts';
import type { Proposer } from '../ports/proposer.ts';
import { activeKey, clusterKeyHoldersCollection, clusterKeysCollection, keyringId, readHoldings, readKeyring, retiredKeysMax, type Keyring, type KeyringKey } from '../resources/cluster-keyring.ts';
import { secretsCollection } from '../resources/collections.ts';
import { newClusterKey, rawPrivateKey, rewrapSecretValue, sealSecretValue, wrapDataKey, type PublicClusterKey } from '../resources/secret-crypto.ts';
import { isSealed, plainSecretBytes, secretRecordSchema, type SecretRecord } from '../resources/secrets.ts';

/**
 * A pass runs at once on a change of the keyring, the secrets or the key holders' reports, on a
 * change of leader or feature level, and once the leader has applied an entry of its term; besides
 * those, this often, for what no event announces (this node's keys unlocked, a keyring prepared on
 * disk), and `keyringRetryMs` after a failed pass.
 */
export const keyringSweepMs = 10_000;
export const keyringRetryMs = 500;
/** Records re-encrypted or re-wrapped in one transaction. */
export const keyringBatchMax = 16;

export interface SecretKeyringOptions {
  node: Leadership & LeaderLog & Proposer & Pick<MembershipView, 'confState'>;
  store: DocumentStore;
  keys: ClusterKeyHolder;
  log: Logger;
  /**
   * A keyring prepared before this node first led (its keys already held here): by `shoal init`,
   * written instead of a new one; by `shoal snapshot restore`, replacing the restored store's.
   */
  pending?: () => { keyring: Keyring; replace: boolean } | undefined;
  /** Told once the pending keyring is in the store (its file can go). */
  onPendingWritten?: () => void;
}

type Step = 'nothing' | 'done' | 'waiting';

/** Whether the store still shows signs of secrets written before the keyring: plain records, their events, their audit records. */
export function heldPlainSecrets(store: DocumentStore): boolean {
  for (const d of store.list(secretsCollection, { limit: 1000 }).items) if (Object.hasOwn(d.doc, 'value')) return true;
  if (plainEvents(store)) return true;
  return store.list('shoal.audit', { limit: 1000 }).items.some((d) => JSON.stringify(d.doc.resources ?? []).includes(`"${secretsCollection}/`));
}

/** Whether the store's retained watch events still hold a secret record in the clear. */
export function plainEvents(store: DocumentStore): boolean {
  return store.eventsSince(store.oldestRev - 1, { collection: secretsCollection }).some((e) => e.doc !== undefined && Object.hasOwn(e.doc.doc, 'value'));
}

function secretsOf(store: DocumentStore): { record: SecretRecord; rev: number }[] {
  const out: { record: SecretRecord; rev: number }[] = [];
  let after: string | undefined;
  for (;;) {
    const page = store.list(secretsCollection, { limit: 1000, ...(after !== undefined ? { after } : {}) });
    for (const d of page.items) {
      const r = secretRecordSchema.safeParse(d.doc);
      if (r.success) out.push({ record: r.data, rev: d.rev });
    }
    if (page.next === null) return out;
    after = page.next;
  }
}

export class SecretKeyring {
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private unsubscribe: Array<() => void> = [];
  /** The term whose first applied entry of its own this loop was woken for. */
  private termSeen = 0;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private readonly logged = new Set<string>();
  private readonly kick = (): void => this.schedule();
  /** A leader may act once it applied an entry of its own term (mayAct): woken once per term for it. */
  private readonly onApplied = (): void => {
    const n = this.o.node;
    if (!n.isLeader || n.appliedTerm !== n.currentTerm || this.termSeen === n.currentTerm) return;
    this.termSeen = n.currentTerm;
    this.schedule();
  };

  constructor(private readonly o: SecretKeyringOptions) {}

  start(): void {
    this.o.node.on('leaderChange', this.kick);
    this.o.node.on('featureLevel', this.kick);
    this.o.node.on('applied', this.onApplied);
    const followed = new Set([clusterKeysCollection, clusterKeyHoldersCollection, secretsCollection]);
    this.unsubscribe = [
      this.o.store.subscribe((ev) => { if (followed.has(ev.collection)) this.kickSoon(); }),
      this.o.store.subscribeRestore(() => this.kickSoon()),
    ];
    this.timer = setInterval(this.kick, keyringSweepMs);
    this.timer.unref();
    this.schedule();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.retry);
    for (const off of this.unsubscribe.splice(0)) off();
    this.o.node.off('leaderChange', this.kick);
    this.o.node.off('featureLevel', this.kick);
    this.o.node.off('applied', this.onApplied);
    await this.running;
  }

  /** The store tells its subscribers while it applies: the pass runs after, on a microtask. */
  private kickSoon(): void {
    void Promise.resolve().then(this.kick);
  }

  private retrySoon(): void {
    if (this.retry !== undefined || this.closed) return;
    this.retry = setTimeout(() => { this.retry = undefined; this.schedule(); }, keyringRetryMs);
    this.retry.unref();
  }

  /** Runs passes until one finds nothing to do (tests await it). */
  settle(): Promise<void> {
    this.schedule();
    return this.running ?? Promise.resolve();
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.loop().finally(() => { this.running = undefined; });
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      let step: Step = 'nothing';
      try {
        step = await this.pass();
      } catch (err) {
        this.warnOnce('failed', `keyring: ${(err as Error).message}; trying again`);
        // An outcome not known (timeout, leader change): decide again only from a store that has it.
        await this.o.node.settleOwnProposals();
        this.retrySoon();
      }
      if (step === 'done') this.again = true;
    } while (this.again && !this.closed);
  }

  private mayAct(): boolean {
    const n = this.o.node;
    return n.isLeader && n.failure === undefined && n.featureLevel >= featureLevelSecretsAtRest && n.appliedTerm === n.currentTerm;
  }

  /** One step; 'done' when it wrote something (the next pass looks again). */
  async pass(): Promise<Step> {
    if (!this.mayAct()) return 'nothing';
    const term = this.o.node.currentTerm;
    const found = readKeyring(this.o.store);
    const pending = this.o.pending?.();
    if (pending !== undefined && (found === undefined || pending.replace)) return this.writePending(pending.keyring, found?.rev, term);
    if (found === undefined) return this.create(term);
    const { keyring, rev } = found;
    if (await this.sealPlain(keyring, term)) return 'done';
    if (keyring.scrubbedAt === null) return this.scrub(keyring, rev, term);
    if (keyring.rotation !== null) return this.rotate(keyring, rev, term);
    return 'nothing';
  }

  private async propose(cmd: Command, term: number): Promise<CommandResult> {
    const data = encodeCommand({ cmd, ts: this.o.node.logTimeNow(), fence: { term }, principal: 'shoal:keyring' });
    const { result } = await this.o.node.propose(data, { featureLevel: featureLevelSecretsAtRest, term });
    return result as CommandResult;
  }

  private async put(doc: Keyring, expect: { rev: number } | { absent: true }, term: number): Promise<boolean> {
    const r = await this.propose({ op: 'put', collection: clusterKeysCollection, id: keyringId, doc: doc as unknown as JsonObject, expect }, term);
    return r.ok;
  }

  private async create(term: number): Promise<Step> {
    const key = newClusterKey();
    // On this voter's disk before the keyring names it: the others fetch it from here.
    this.o.keys.add(key.id, key.privateKey);
    const keyring: Keyring = {
      active: key.id, keys: [keyringKeyOf(key, null, Date.now())], recovery: null, retired: [],
      scrubbedAt: heldPlainSecrets(this.o.store) ? null : 0, rotation: null, autolock: null,
    };
    if (!await this.put(keyring, { absent: true }, term)) {
      this.o.keys.remove(key.id);
      return 'done';
    }
    this.o.log.info(`keyring: created cluster key ${key.id}; secrets are encrypted under it from now on (no recovery key yet: make one with shoal secret recovery-key)`);
    return 'done';
  }

  /** The keyring `shoal init` or `shoal snapshot restore` prepared, its keys already on this node. */
  private async writePending(keyring: Keyring, rev: number | undefined, term: number): Promise<Step> {
    const missing = keyring.keys.filter((k) => this.o.keys.privateKey(k.id) === undefined).map((k) => k.id);
    if (missing.length > 0) {
      this.warnOnce('pending', `keyring: the prepared keyring names cluster keys this node does not hold (${missing.join(', ')}); it is not written`);
      return 'nothing';
    }
    const scrub = keyring.scrubbedAt === 0 && heldPlainSecrets(this.o.store) ? { scrubbedAt: null } : {};
    if (await this.put({ ...keyring, ...scrub }, rev === undefined ? { absent: true } : { rev }, term)) {
      this.o.onPendingWritten?.();
      this.o.log.info(`keyring: wrote the prepared keyring (active key ${keyring.active}${keyring.recovery !== null ? `, recovery key ${keyring.recovery.id}` : ''})`);
    }
    return 'done';
  }

  /** Encrypts up to a batch of plain records; true if there were any. */
  private async sealPlain(keyring: Keyring, term: number): Promise<boolean> {
    const plain = secretsOf(this.o.store).filter((s) => !isSealed(s.record));
    if (plain.length === 0) return false;
    const key = activeKey(keyring);
    const ops: Op[] = plain.slice(0, keyringBatchMax).map(({ record, rev }) => {
      if (isSealed(record)) throw new Error('assertion: filtered');
      const { value: _plain, ...fields } = record;
      const sealed = { ...fields, sealed: sealSecretValue(record.name, plainSecretBytes(record), key) };
      return { op: 'put', collection: secretsCollection, id: record.name, doc: sealed as unknown as JsonObject, expect: { rev } };
    });
    const r = await this.propose({ op: 'txn', compare: [], success: ops, failure: [] }, term);
    if (r.ok) this.o.log.info(`keyring: encrypted ${ops.length} secret(s) written in the clear before feature level ${featureLevelSecretsAtRest}`);
    return true;
  }

  /** Compacts the watch events that hold plain records, then records from where the store is clean. */
  private async scrub(keyring: Keyring, rev: number, term: number): Promise<Step> {
    let at = this.o.store.revision;
    if (plainEvents(this.o.store)) {
      const r = await this.propose({ op: 'compact' }, term);
      if (!r.ok || r.kind !== 'compact') return 'done';
      at = r.rev;
    }
    if (await this.put({ ...keyring, scrubbedAt: at }, { rev }, term)) {
      this.o.log.info(`keyring: no secret is left in the clear in the store from revision ${at}; every node now rewrites its log and snapshot files without the older entries`);
    }
    return 'done';
  }

  private async rotate(keyring: Keyring, rev: number, term: number): Promise<Step> {
    const r = keyring.rotation;
    if (r === null) return 'nothing';
    if (r.phase === 'adding') {
      const voters = this.o.node.confState().voters;
      const waiting = votersWithout(this.o.store, voters, r.to);
      if (waiting.length === voters.length && this.o.keys.privateKey(r.to) === undefined && !this.o.keys.locked) return this.replaceLostKey(keyring, rev, term);
      if (waiting.length > 0) {
        this.infoOnce(`rotation ${r.id}: waiting for ${waiting.join(', ')} to hold key ${r.to}`);
        return 'waiting';
      }
      const ok = await this.put({ ...keyring, active: r.to, rotation: { ...r, phase: 'rewrapping' } }, { rev }, term);
      if (ok) this.o.log.info(`keyring: rotation ${r.id}: every voter holds key ${r.to}; it wraps new values, and the data keys are re-wrapped under it`);
      return 'done';
    }
    const from = this.o.keys.privateKey(r.from);
    const to = keyring.keys.find((k) => k.id === r.to);
    const stale = secretsOf(this.o.store).filter((s) => isSealed(s.record) && s.record.sealed.key.keyId !== r.to);
    if (stale.length > 0) {
      if (from === undefined || to === undefined) {
        this.warnOnce(`rewrap-${r.id}`, `keyring: rotation ${r.id}: this leader cannot open key ${r.from} (${this.o.keys.locked ? 'it is locked: run shoal unlock on it' : 'it does not hold it'}); the rotation waits`);
        return 'waiting';
      }
      const ops: Op[] = stale.slice(0, keyringBatchMax).map(({ record, rev: at }) => {
        if (!isSealed(record)) throw new Error('assertion: filtered');
        const doc = { ...record, sealed: rewrapSecretValue(record.name, record.sealed, from, { id: to.id, publicKey: to.publicKey }) };
        return { op: 'put', collection: secretsCollection, id: record.name, doc: doc as unknown as JsonObject, expect: { rev: at } };
      });
      await this.propose({ op: 'txn', compare: [], success: ops, failure: [] }, term);
      return 'done';
    }
    const keys = keyring.keys.filter((k) => k.id !== r.from);
    const retired = [...keyring.retired, r.from].slice(-retiredKeysMax);
    const ok = await this.put({ ...keyring, keys, retired, rotation: null }, { rev }, term);
    if (ok) this.o.log.info(`keyring: rotation ${r.id} done: every data key is wrapped by ${r.to}; key ${r.from} is retired and deleted from every voter`);
    return 'done';
  }

  /**
   * No voter holds the rotation's new key: the leader that made it left the cluster before any
   * other voter fetched it. A new key, made here, takes its place; the lost one is retired.
   */
  private async replaceLostKey(keyring: Keyring, rev: number, term: number): Promise<Step> {
    const r = keyring.rotation;
    if (r === null) return 'nothing';
    const key = newClusterKey();
    this.o.keys.add(key.id, key.privateKey);
    const keys = [...keyring.keys.filter((k) => k.id !== r.to), keyringKeyOf(key, keyring.recovery, Date.now())];
    const retired = [...keyring.retired, r.to].slice(-retiredKeysMax);
    if (!await this.put({ ...keyring, keys, retired, rotation: { ...r, to: key.id } }, { rev }, term)) {
      this.o.keys.remove(key.id);
      return 'done';
    }
    this.o.log.warn(`keyring: rotation ${r.id}: no voter holds its new key ${r.to} (the leader that made it is gone); key ${key.id}, made here, replaces it`);
    return 'done';
  }

  private warnOnce(key: string, message: string): void {
    if (this.logged.has(key)) return;
    this.logged.add(key);
    this.o.log.warn(message);
  }

  private infoOnce(message: string): void {
    if (this.logged.has(message)) return;
    this.logged.add(message);
    this.o.log.info(message);
  }
}

/** The voters whose holding report does not show `keyId` usable (not held, or locked). */
export function votersWithout(store: DocumentStore, voters: readonly string[], keyId: string): string[] {
  const holdings = readHoldings(store);
  return voters.filter((v) => {
    const h = holdings.get(v);
    return h === undefined || h.locked || !h.keys.includes(keyId);
  });
}

/** A keyring key for `key`, its private half sealed to the recovery key when there is one. */
export function keyringKeyOf(key: { id: string; publicKey: string; privateKey: KeyObject }, recovery: Keyring['recovery'], now: number): KeyringKey {
  const sealed = recovery === null ? null : wrapDataKey(rawPrivateKey(key.privateKey), `cluster key ${key.id}`, { id: recovery.id, publicKey: recovery.publicKey } satisfies PublicClusterKey);
  return { id: key.id, publicKey: key.publicKey, createdAt: now, recovery: sealed };
}
