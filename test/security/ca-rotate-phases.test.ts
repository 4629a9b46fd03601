// The pure parts of `shoal ca rotate`: the rollover certificate a peer trusting only the old CA
// accepts, the trust bundle of each phase, and when the leader may move the rotation on.

import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleFingerprints, certFingerprint, issuerIn, joinPem, leafOf, splitPem } from '../../src/security/ca-bundle.ts';
import { createRolloverCa, type RolloverCa } from '../../src/security/ca-rollover.ts';
import { bundleFor, nextPhase, waitingMembers, withRetired, retiredFingerprintsMax, type CaNodeReport, type CaRotation } from '../../src/security/ca-rotation.ts';
import { createCa, issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import { readOwnRotation } from '../../src/security/ca-rotation-authority.ts';
import { caRotationCollection, caRotationDocId } from '../../src/security/ca-rotation.ts';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';

let old: PemPair;
let next: RolloverCa;

beforeAll(async () => {
  old = await createCa('0123456789abcdef');
  next = await createRolloverCa(old);
});

/** Whether a client trusting `caPem` completes a TLS 1.3 handshake with a server serving `chainPem`. */
async function handshake(chainPem: string, keyPem: string, caPem: string): Promise<true | string> {
  const server = createServer({ cert: chainPem, key: keyPem, minVersion: 'TLSv1.3' }, (s) => s.end());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const socket: TLSSocket = connect({ host: '127.0.0.1', port, ca: caPem, checkServerIdentity: checkNodeServerIdentity });
  try {
    return await new Promise<true | string>((resolve) => {
      socket.once('secureConnect', () => resolve(true));
      socket.once('error', (e) => resolve(e.message));
    });
  } finally {
    socket.destroy();
    server.close();
  }
}

describe('the rollover certificate', () => {
  it('keeps the old subject, a new key, and is signed by the old CA', () => {
    const oldCert = new X509Certificate(old.certPem);
    const cross = new X509Certificate(next.crossPem);
    const fresh = new X509Certificate(next.ca.certPem);
    expect(fresh.subject).toBe(oldCert.subject);
    expect(cross.subject).toBe(oldCert.subject);
    expect(cross.publicKey.export({ format: 'der', type: 'spki' })).toEqual(fresh.publicKey.export({ format: 'der', type: 'spki' }));
    expect(cross.verify(oldCert.publicKey)).toBe(true);
    expect(fresh.verify(oldCert.publicKey)).toBe(false);
    expect(cross.ca && fresh.ca).toBe(true);
  });

  it('lets a client that trusts only the old CA (path length 0) accept a node certificate of the new CA', async () => {
    const leaf = await issueNodeCert(next.ca, 'aaaaaaaaaaaaaaaa', { hosts: ['127.0.0.1'] });
    expect(await handshake(joinPem([leaf.certPem, next.crossPem]), leaf.keyPem, old.certPem)).toBe(true);
    expect(await handshake(leaf.certPem, leaf.keyPem, old.certPem)).toMatch(/verify|certificate/);
    expect(await handshake(joinPem([leaf.certPem, next.crossPem]), leaf.keyPem, next.ca.certPem)).toBe(true);
    expect(await handshake(leaf.certPem, leaf.keyPem, joinPem([old.certPem, next.ca.certPem]))).toBe(true);
  });

  it('does not let the old CA vouch for its own certificates once only the new one is trusted', async () => {
    const oldLeaf = await issueNodeCert(old, 'bbbbbbbbbbbbbbbb', { hosts: ['127.0.0.1'] });
    expect(await handshake(oldLeaf.certPem, oldLeaf.keyPem, joinPem([old.certPem, next.ca.certPem]))).toBe(true);
    expect(await handshake(joinPem([oldLeaf.certPem, next.crossPem]), oldLeaf.keyPem, next.ca.certPem)).toMatch(/verify|certificate/);
  });
});

describe('the trust bundle', () => {
  it('splits, joins and names the issuer of a chain by key, though both CAs share a subject', async () => {
    const bundle = joinPem([old.certPem, next.ca.certPem]);
    expect(splitPem(bundle)).toHaveLength(2);
    expect(bundleFingerprints(bundle)).toEqual([certFingerprint(old.certPem), certFingerprint(next.ca.certPem)]);
    const leaf = await issueNodeCert(next.ca, 'aaaaaaaaaaaaaaaa', { hosts: [] });
    const chain = joinPem([leaf.certPem, next.crossPem]);
    expect(leafOf(chain)).toBe(leaf.certPem.trim());
    expect(issuerIn(chain, bundle)).toBe(next.ca.certPem.trim());
    expect(issuerIn(chain, old.certPem)).toBeUndefined();
    const oldLeaf = await issueNodeCert(old, 'bbbbbbbbbbbbbbbb', { hosts: [] });
    expect(issuerIn(oldLeaf.certPem, bundle)).toBe(old.certPem.trim());
  });
});

function rotation(phase: CaRotation['phase']): CaRotation {
  return { id: '0011223344556677', phase, oldCaPem: old.certPem, newCaPem: next.ca.certPem, crossPem: next.crossPem, startedBy: 'alice', startedAtMs: 0, phaseAtMs: 0, retiredFingerprints: [] };
}

describe('the phases', () => {
  const members = [{ id: 'a', name: 'n1' }, { id: 'b', name: 'n2' }];
  const oldFp = (): string => certFingerprint(old.certPem);
  const newFp = (): string => certFingerprint(next.ca.certPem);
  const report = (over: Partial<CaNodeReport>): CaNodeReport => ({ rotation: '0011223344556677', bundle: [oldFp(), newFp()], certCa: oldFp(), holdsNewKey: false, holdsOldKey: false, ...over });

  it('go add, reissue, retire, done, and stay done', () => {
    expect(['add', 'reissue', 'retire', 'done', 'done'].slice(1)).toEqual(['add', 'reissue', 'retire', 'done'].map((p) => nextPhase(p as CaRotation['phase'])));
    expect(bundleFor(rotation('add'))).toEqual([old.certPem, next.ca.certPem]);
    expect(bundleFor(rotation('reissue'))).toEqual([old.certPem, next.ca.certPem]);
    expect(bundleFor(rotation('retire'))).toEqual([next.ca.certPem]);
  });

  it('add waits for every member to trust the new CA and every voter to hold its key', () => {
    const r = rotation('add');
    const learnerOnly = new Map([['a', report({ holdsNewKey: true })], ['b', report({})]]);
    expect(waitingMembers(r, members, ['a'], learnerOnly)).toEqual([]);
    expect(waitingMembers(r, members, ['a', 'b'], learnerOnly)).toEqual([{ id: 'b', name: 'n2', why: expect.stringMatching(/new CA key/) }]);
    expect(waitingMembers(r, members, ['a'], new Map([['a', report({ holdsNewKey: true, bundle: [oldFp()] })]])).map((w) => w.name)).toEqual(['n1', 'n2']);
    // A report about another rotation counts for nothing.
    expect(waitingMembers(r, members, [], new Map([['a', report({ rotation: 'ffffffffffffffff' })], ['b', report({})]])).map((w) => w.why)).toEqual([expect.stringMatching(/not reported/)]);
  });

  it('reissue waits for a certificate of the new CA; retire for the old CA to be gone', () => {
    expect(waitingMembers(rotation('reissue'), members, [], new Map([['a', report({ certCa: newFp() })], ['b', report({})]])).map((w) => w.id)).toEqual(['b']);
    const retired = report({ bundle: [newFp()], certCa: newFp() });
    expect(waitingMembers(rotation('retire'), members, [], new Map([['a', retired], ['b', { ...retired, holdsOldKey: true }]])).map((w) => w.why)).toEqual([expect.stringMatching(/old CA key/)]);
    expect(waitingMembers(rotation('retire'), members, [], new Map([['a', retired], ['b', report({ certCa: newFp() })]])).map((w) => w.why)).toEqual([expect.stringMatching(/trusts the old CA/)]);
  });

  it('keeps a bounded list of retired fingerprints, newest last, without repeats', () => {
    let list: string[] = [];
    for (let i = 0; i < retiredFingerprintsMax + 3; i++) list = withRetired(list, i.toString(16).padStart(64, '0'));
    expect(list).toHaveLength(retiredFingerprintsMax);
    expect(list.at(-1)).toBe((retiredFingerprintsMax + 2).toString(16).padStart(64, '0'));
    expect(withRetired(['a', 'b'], 'a')).toEqual(['b', 'a']);
  });
});

describe('the rotation record a node follows', () => {
  it('is one about a CA it trusts; a restored store\'s record of another cluster is ignored', async () => {
    const store = new DocumentStore();
    const doc = rotation('reissue') as unknown as JsonObject;
    store.apply({ index: 1, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: caRotationCollection, id: caRotationDocId, doc }, ts: 0, principal: 'shoal' }) });
    expect(readOwnRotation(store, old.certPem)?.rotation.id).toBe('0011223344556677');
    expect(readOwnRotation(store, next.ca.certPem)?.rotation.phase).toBe('reissue');
    const other = await createCa('fedcba9876543210');
    expect(readOwnRotation(store, other.certPem)).toBeUndefined();
  });
});
