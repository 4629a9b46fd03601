// Client certificates: the subject names the principal and the role, the CA signs them, and a
// certificate request is honoured only when it is signed by the key it carries.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate, webcrypto } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createCa } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { verifyCsr } from '../../src/security/csr.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';

const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

async function csrPem(): Promise<string> {
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=ignored', keys: keys as never, signingAlgorithm: alg });
  return csr.toString('pem');
}

describe('client certificates', () => {
  it('names the principal and role in the subject, is signed by the CA, and serves as a client only', async () => {
    const ca = await createCa('c1');
    const c = await issueClientCert(ca, { principal: 'alice', role: 'operator' });
    const cert = new X509Certificate(c.certPem);
    expect(cert.subject.split('\n').sort()).toEqual(['CN=alice', 'O=shoal', 'OU=operator']);
    expect(cert.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
    expect(c.keyPem).toContain('BEGIN PRIVATE KEY');
    // A client certificate never passes as a node's server certificate.
    expect(checkNodeServerIdentity('127.0.0.1', { subject: { CN: 'alice', OU: 'operator' } } as never)).toBeInstanceOf(Error);
  });

  it('signs a CSR for the key it carries, and returns no key', async () => {
    const ca = await createCa('c1');
    const csr = await csrPem();
    const c = await issueClientCert(ca, { principal: 'ci-bot', role: 'reader', publicKey: (await verifyCsr(csr)).publicKey });
    expect(c.keyPem).toBe('');
    const requested = new x509.Pkcs10CertificateRequest(csr);
    const issued = new x509.X509Certificate(c.certPem);
    expect(Buffer.from(issued.publicKey.rawData).equals(Buffer.from(requested.publicKey.rawData))).toBe(true);
  });

  it('refuses a principal outside the rule, one that poses as a node, and an unknown role', async () => {
    const ca = await createCa('c1');
    await expect(issueClientCert(ca, { principal: 'node:abc', role: 'admin' })).rejects.toThrow(/invalid principal/);
    await expect(issueClientCert(ca, { principal: 'a, OU=admin', role: 'reader' })).rejects.toThrow(/invalid principal/);
    await expect(issueClientCert(ca, { principal: 'bob', role: 'root' as never })).rejects.toThrow(/invalid role/);
  });
});
