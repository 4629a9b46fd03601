// The deny-list of certificate serials: how serials compare, that the list is bounded and sheds
// expired entries, and the index a node checks handshakes against.

import { X509Certificate } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { isShoalError } from '../../src/errors.ts';
import { createCa, issueNodeCert } from '../../src/security/certificates.ts';
import { RevokedSerialIndex, revokedSerialsOf } from '../../src/security/revoked-index.ts';
import {
  addRevocation, parseSerial, pruneExpired, revokedCertsCollection, revokedListId, revokedListOf, revokedSerialsMax, serialKey,
  type Revocation, type RevokedList,
} from '../../src/security/revoked-serials.ts';

function entry(serial: string, expiresAtMs: number, extra: Partial<Revocation> = {}): Revocation {
  return { serial, kind: 'unknown', expiresAtMs, revokedAtMs: 0, revokedBy: 'alice', ...extra };
}

describe('serials', () => {
  it('compare in any case, with or without colons and leading zeros', () => {
    expect(serialKey('00AB:CD')).toBe('abcd');
    expect(serialKey('0abcd')).toBe(serialKey('ABCD'));
    expect(serialKey('000')).toBe('0');
  });

  it('parse what an operator types, and refuse what is not a serial', () => {
    expect(parseSerial(' 0A:1B ')).toBe('0a1b');
    expect(parseSerial('xyz')).toBeNull();
    expect(parseSerial('')).toBeNull();
    expect(parseSerial('a'.repeat(41))).toBeNull();
  });
});

describe('the list', () => {
  it('adds a serial once: a second revocation keeps the first entry', () => {
    const first = addRevocation({ entries: [] }, entry('0abc', 100, { reason: 'first' }), 0);
    expect(first.added).toBe(true);
    const again = addRevocation(first.list, entry('ABC', 100, { reason: 'second' }), 0);
    expect(again.added).toBe(false);
    expect(again.entry.reason).toBe('first');
    expect(again.list.entries).toHaveLength(1);
  });

  it('drops entries whose certificate can no longer be used, when the next one is added', () => {
    const list: RevokedList = { entries: [entry('01', 10), entry('02', 20), entry('03', 30)] };
    expect(pruneExpired(list.entries, 20).map((e) => e.serial)).toEqual(['03']);
    const out = addRevocation(list, entry('04', 40), 20);
    expect(out.list.entries.map((e) => e.serial)).toEqual(['03', '04']);
  });

  it('refuses a revocation past the bound with limit_reached, and takes it once an entry expired', () => {
    const full: RevokedList = { entries: [entry('01', 10), entry('02', 50)] };
    let err: unknown;
    try {
      addRevocation(full, entry('03', 60), 5, 2);
    } catch (e) {
      err = e;
    }
    expect(isShoalError(err) && err.code === 'limit_reached' && err.details?.limit === 'revokedSerialsMax').toBe(true);
    expect(addRevocation(full, entry('03', 60), 10, 2).list.entries.map((e) => e.serial)).toEqual(['02', '03']);
  });

  it('never holds more than the bound, nor an entry expired at the time of the last change (property)', () => {
    const op = fc.record({ serial: fc.integer({ min: 1, max: 40 }), lifeMs: fc.integer({ min: 1, max: 50 }), stepMs: fc.integer({ min: 0, max: 10 }) });
    fc.assert(fc.property(fc.array(op, { maxLength: 200 }), fc.integer({ min: 1, max: 8 }), (ops, max) => {
      let list: RevokedList = { entries: [] };
      let now = 0;
      for (const o of ops) {
        now += o.stepMs;
        try {
          list = addRevocation(list, entry(o.serial.toString(16), now + o.lifeMs), now, max).list;
        } catch (e) {
          if (!isShoalError(e) || e.code !== 'limit_reached') throw e;
          // Refused only when full of entries still in force.
          expect(pruneExpired(list.entries, now)).toHaveLength(max);
        }
        expect(list.entries.length).toBeLessThanOrEqual(max);
        expect(new Set(list.entries.map((e) => serialKey(e.serial))).size).toBe(list.entries.length);
      }
    }));
  });

  it('reads a stored document entry by entry: one it cannot read does not hide the others', () => {
    const list = revokedListOf({ entries: [entry('0a', 5), { serial: 'not hex' }, entry('0b', 5)] });
    expect(list.entries.map((e) => e.serial)).toEqual(['0a', '0b']);
    expect(revokedListOf(undefined).entries).toEqual([]);
    expect(revokedSerialsMax).toBeGreaterThan(0);
  });
});

describe('the index of a store', () => {
  let rev = 0;
  function put(store: DocumentStore, list: RevokedList): void {
    rev++;
    store.apply({ index: rev, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: revokedCertsCollection, id: revokedListId, doc: list as never }, ts: rev, principal: 'alice' }) });
  }

  it('follows the applied list, and tells listeners which serials were added', async () => {
    rev = 0;
    const store = new DocumentStore();
    const index = new RevokedSerialIndex(store);
    const told: string[][] = [];
    index.onRevoked((added) => told.push([...added]));
    expect(index.has('0a')).toBe(false);
    put(store, { entries: [entry('0a', 99)] });
    expect(index.has('0A')).toBe(true);
    expect(index.has('000a')).toBe(true);
    put(store, { entries: [entry('0a', 99), entry('0b', 99)] });
    await Promise.resolve();
    expect(told).toEqual([['a'], ['b']]);
    // An entry dropped (expired) is no longer refused, and tells nobody.
    put(store, { entries: [entry('0b', 99)] });
    await Promise.resolve();
    expect(index.has('0a')).toBe(false);
    expect(told).toHaveLength(2);
  });

  it('reloads after a restored snapshot, and is one index per store', () => {
    rev = 0;
    const source = new DocumentStore();
    put(source, { entries: [entry('0c', 99)] });
    const target = new DocumentStore();
    const index = revokedSerialsOf(target);
    expect(revokedSerialsOf(target)).toBe(index);
    expect(index.has('0c')).toBe(false);
    target.restore(source.snapshot());
    expect(index.has('0c')).toBe(true);
  });

  it('answers for a certificate by its PEM', async () => {
    rev = 0;
    const ca = await createCa('test-cluster');
    const leaf = await issueNodeCert(ca, 'n1', { hosts: [] });
    const store = new DocumentStore();
    const index = new RevokedSerialIndex(store);
    expect(index.hasCertificate(leaf.certPem)).toBe(false);
    put(store, { entries: [entry(new X509Certificate(leaf.certPem).serialNumber.toLowerCase(), 99)] });
    expect(index.hasCertificate(leaf.certPem)).toBe(true);
  });
});
