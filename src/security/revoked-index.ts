// What a node checks every handshake against: the revoked serials of its applied store
// (revoked-serials.ts), kept as a set and refreshed as the list's document changes, and told to
// whoever closes the connections already open with a certificate that was just revoked (the
// client API, the peer transport).
//
// One index per store (revokedSerialsOf): the API's authentication, the renew route and the
// transport must all refuse the same serials at the same applied revision, and the store is the
// one thing they share.

import { X509Certificate } from 'node:crypto';
import type { DocumentStore } from '../../fsm/index.ts';
import { revokedCertsCollection, revokedListId, revokedListOf, serialKey } from './revoked-serials.ts';

/** The parts of the store the index reads. */
export type RevokedSource = Pick<DocumentStore, 'get' | 'subscribe' | 'subscribeRestore'>;

export type RevokedListener = (added: ReadonlySet<string>) => void;

export class RevokedSerialIndex {
  private keys: ReadonlySet<string> = new Set();
  private readonly listeners = new Set<RevokedListener>();

  constructor(private readonly store: RevokedSource) {
    this.reload();
    store.subscribe((ev) => {
      if (ev.collection === revokedCertsCollection && ev.id === revokedListId) this.reload();
    });
    // A restored snapshot may carry a longer list than the log this node applied.
    store.subscribeRestore(() => this.reload());
  }

  /** Whether the certificate with this serial (any case, with or without leading zeros) is revoked. */
  has(serial: string): boolean {
    return this.keys.has(serialKey(serial));
  }

  /** Whether the certificate in `certPem` is revoked (a node asks it of its own). */
  hasCertificate(certPem: string): boolean {
    return this.has(new X509Certificate(certPem).serialNumber);
  }

  get size(): number {
    return this.keys.size;
  }

  /** Calls `listener` with the serial keys (serialKey form) each change adds. Returns an unsubscribe. */
  onRevoked(listener: RevokedListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private reload(): void {
    const doc = this.store.get(revokedCertsCollection, revokedListId);
    const next = new Set(revokedListOf(doc?.doc).entries.map((e) => serialKey(e.serial)));
    const added = new Set([...next].filter((k) => !this.keys.has(k)));
    this.keys = next;
    if (added.size === 0) return;
    // Not inside the store's apply: closing connections is the listeners' business, not apply's.
    queueMicrotask(() => {
      for (const l of this.listeners) l(added);
    });
  }
}

const indexes = new WeakMap<RevokedSource, RevokedSerialIndex>();

/** The index of `store`'s revoked serials, made on first use. */
export function revokedSerialsOf(store: RevokedSource): RevokedSerialIndex {
  let index = indexes.get(store);
  if (index === undefined) indexes.set(store, (index = new RevokedSerialIndex(store)));
  return index;
}
