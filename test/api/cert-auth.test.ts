// The certificate branch of the API's authentication: a revoked serial and a removed node's
// certificate are refused (401, reasons revoked and removed), and the connections held with
// such certificates are closed when that applies (cert-sockets.ts). Sockets are stand-ins here;
// test/security/revoke-certificate.test.ts does the same over real TLS.

import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import type { FastifyRequest } from 'fastify';
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { authenticate } from '../../src/api/auth.ts';
import { CertSockets } from '../../src/api/cert-sockets.ts';
import { isShoalError } from '../../src/errors.ts';
import { revokedCertsCollection, revokedListId, serialKey } from '../../src/security/revoked-serials.ts';
import { createCa, issueNodeCert, type PemPair } from '../../src/security/index.ts';

interface FakeCert {
  subject: { CN: string; OU?: string };
  subjectaltname?: string;
  serialNumber: string;
  /** The certificate's DER, for the trust-bundle check. */
  raw?: Buffer;
}

const client = (serial: string): FakeCert => ({ subject: { CN: 'alice', OU: 'admin' }, serialNumber: serial });
const nodeCert = (id: string, serial: string): FakeCert => ({ subject: { CN: id }, subjectaltname: `URI:urn:shoal:node:${id}`, serialNumber: serial });

class FakeSocket extends EventEmitter {
  destroyed = false;
  authorized = true;
  constructor(private readonly cert: FakeCert) { super(); }
  getPeerCertificate(): FakeCert { return this.cert; }
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

function requestWith(cert: FakeCert, socket = new FakeSocket(cert)): FastifyRequest {
  return { raw: { socket }, headers: {} } as unknown as FastifyRequest;
}

function storeRevoking(...serials: string[]): DocumentStore {
  const store = new DocumentStore();
  const entries = serials.map((serial) => ({ serial, kind: 'unknown', expiresAtMs: Date.now() + 60_000, revokedAtMs: 0, revokedBy: 'admin' }));
  store.apply({ index: 1, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: revokedCertsCollection, id: revokedListId, doc: { entries } }, ts: 1, principal: 'admin' }) });
  return store;
}

function refusal(f: () => unknown): { code: string; reason: unknown } | undefined {
  try {
    f();
  } catch (err) {
    if (isShoalError(err)) return { code: err.code, reason: err.details?.reason };
    throw err;
  }
  return undefined;
}

const tls = { mode: 'tls' as const, tls: { caPem: '', certPem: '', keyPem: '' } };

describe('authenticating a certificate', () => {
  const store = storeRevoking('0abc');
  const ctx = { store, node: { isRemoved: (id: string) => id === 'gone' } };

  it('takes a client certificate that is not revoked', () => {
    expect(authenticate(requestWith(client('0DEF')), tls, ctx)).toEqual({ principal: 'alice', role: 'admin', via: 'certificate' });
  });

  it('refuses a revoked serial whatever case or leading zeros Node prints it with: 401 revoked', () => {
    for (const serial of ['0ABC', 'ABC', '0abc']) {
      expect(refusal(() => authenticate(requestWith(client(serial)), tls, ctx))).toEqual({ code: 'unauthenticated', reason: 'revoked' });
    }
    expect(refusal(() => authenticate(requestWith(nodeCert('n1', '0ABC')), tls, ctx))).toEqual({ code: 'unauthenticated', reason: 'revoked' });
  });

  it('refuses the node certificate of a removed node (it used to be admin): 401 removed', () => {
    expect(authenticate(requestWith(nodeCert('n1', '01')), tls, ctx)).toMatchObject({ principal: 'node:n1', role: 'admin', via: 'node' });
    expect(refusal(() => authenticate(requestWith(nodeCert('gone', '02')), tls, ctx))).toEqual({ code: 'unauthenticated', reason: 'removed' });
  });
});

describe('CertSockets', () => {
  function setup(revoked: Set<string>, removed: Set<string>): { sockets: CertSockets; closed: string[] } {
    const closed: string[] = [];
    const sockets = new CertSockets({
      isRevoked: (s) => revoked.has(serialKey(s)), isRemoved: (id) => removed.has(id), onClosed: (why, who) => closed.push(`${why} ${who}`),
    });
    return { sockets, closed };
  }
  const track = (sockets: CertSockets, cert: FakeCert): FakeSocket => {
    const s = new FakeSocket(cert);
    sockets.track(s as unknown as TLSSocket);
    return s;
  };

  it('closes the connections of a serial once it is revoked, and only those', () => {
    const revoked = new Set<string>();
    const { sockets, closed } = setup(revoked, new Set());
    const alice = track(sockets, client('0A'));
    const bob = track(sockets, client('0B'));
    expect(sockets.size).toBe(2);
    revoked.add('a');
    expect(sockets.closeRevoked(new Set(['a']))).toBe(1);
    expect(alice.destroyed).toBe(true);
    expect(bob.destroyed).toBe(false);
    expect(closed).toEqual(['revoked serial a']);
    expect(sockets.size).toBe(1);
  });

  it('closes the connections of a node once it is removed', () => {
    const removed = new Set<string>();
    const { sockets } = setup(new Set(), removed);
    const n1 = track(sockets, nodeCert('n1', '01'));
    const n2 = track(sockets, nodeCert('n2', '02'));
    expect(sockets.closeRemoved()).toBe(0);
    removed.add('n2');
    expect(sockets.closeRemoved()).toBe(1);
    expect([n1.destroyed, n2.destroyed]).toEqual([false, true]);
  });

  it('holds no connection whose certificate is refused already (its requests get 401 with the reason), nor an unverified one', () => {
    const { sockets } = setup(new Set(['c']), new Set(['gone']));
    expect(track(sockets, client('0c')).destroyed).toBe(false);
    expect(track(sockets, nodeCert('gone', '0d')).destroyed).toBe(false);
    const unverified = new FakeSocket(client('0e'));
    unverified.authorized = false;
    sockets.track(unverified as unknown as TLSSocket);
    expect(sockets.size).toBe(0);
  });
});

describe('a certificate of a CA the trust bundle no longer holds (a CA rotation retired it)', () => {
  let oldCa: PemPair;
  let newCa: PemPair;
  let oldDer: Buffer;
  beforeAll(async () => {
    [oldCa, newCa] = await Promise.all([createCa('c1'), createCa('c1')]);
    oldDer = new X509Certificate((await issueNodeCert(oldCa, 'n1', { hosts: ['127.0.0.1'] })).certPem).raw;
  });

  it('is refused on a connection opened before the retire: 401 untrusted_ca, looked at again when the bundle changes', () => {
    const bundle = { caPem: '' };
    const ctx = { store: new DocumentStore(), security: bundle };
    const cert = { ...client('0A'), raw: oldDer };
    const socket = new FakeSocket(cert);
    bundle.caPem = `${oldCa.certPem}\n${newCa.certPem}`;
    expect(authenticate(requestWith(cert, socket), tls, ctx)).toMatchObject({ principal: 'alice' });
    bundle.caPem = newCa.certPem;
    expect(refusal(() => authenticate(requestWith(cert, socket), tls, ctx))).toEqual({ code: 'unauthenticated', reason: 'untrusted_ca' });
    bundle.caPem = oldCa.certPem;
    expect(authenticate(requestWith(cert, socket), tls, ctx)).toMatchObject({ principal: 'alice' });
  });

  it('CertSockets closes the connections of such certificates, and only those', () => {
    let bundle = oldCa.certPem;
    const closed: string[] = [];
    const trusted = (der: Buffer): boolean => new X509Certificate(der).checkIssued(new X509Certificate(bundle));
    const sockets = new CertSockets({ isRevoked: () => false, isRemoved: () => false, isTrusted: trusted, onClosed: (why, who) => closed.push(`${why} ${who}`) });
    const old = new FakeSocket({ ...client('0A'), raw: oldDer });
    const other = new FakeSocket(client('0B'));
    sockets.track(old as unknown as TLSSocket);
    sockets.track(other as unknown as TLSSocket);
    expect(sockets.closeUntrusted()).toBe(0);
    bundle = newCa.certPem;
    expect(sockets.closeUntrusted()).toBe(1);
    expect([old.destroyed, other.destroyed]).toEqual([true, false]);
    expect(closed).toEqual(['untrusted serial a']);
  });
});
