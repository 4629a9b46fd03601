import { X509Certificate, createPrivateKey } from 'node:crypto';
import { once } from 'node:events';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { caFingerprint, createCa, issueNodeCert, nodeIdFromCert, nodeIdFromCertPem } from '../../src/security/index.ts';

describe('cluster CA and node certificates', () => {
  it('creates a self-signed P-256 CA limited to signing certificates', async () => {
    const ca = await createCa('c1');
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toContain('c1');
    expect(cert.checkIssued(cert)).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(ca.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(createPrivateKey(ca.keyPem).asymmetricKeyType).toBe('ec');
  });

  it('issues a node certificate naming the node, its hosts and both TLS purposes', async () => {
    const ca = await createCa('c1');
    const node = await issueNodeCert(ca, 'node-a', { hosts: ['127.0.0.1', 'localhost', '::1', 'box.lan'] });
    const cert = new X509Certificate(node.certPem);
    const caCert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(false);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.subject).toContain('CN=node-a');
    expect(cert.subjectAltName).toContain('URI:urn:shoal:node:node-a');
    expect(cert.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(cert.subjectAltName).toContain('DNS:localhost');
    expect(cert.subjectAltName).toContain('DNS:box.lan');
    expect(cert.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(cert.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']));
    const years = (Date.parse(cert.validTo) - Date.now()) / (365 * 24 * 3600 * 1000);
    expect(years).toBeGreaterThan(4.9);
    expect(years).toBeLessThan(5.1);
    expect(nodeIdFromCertPem(node.certPem)).toBe('node-a');
  });

  it('refuses ids that do not fit a name', async () => {
    await expect(createCa('bad id, O=evil')).rejects.toThrow(TypeError);
    const ca = await createCa('c1');
    await expect(issueNodeCert(ca, '', { hosts: [] })).rejects.toThrow(TypeError);
    await expect(issueNodeCert(ca, 'a/b', { hosts: [] })).rejects.toThrow(TypeError);
  });

  it('fingerprints a CA as sha-256 hex of its DER, stable and distinct per CA', async () => {
    const a = await createCa('c1');
    const b = await createCa('c1');
    const fp = caFingerprint(a.certPem);
    expect(fp).toMatch(/^[0-9a-f]{64}$/);
    expect(caFingerprint(a.certPem)).toBe(fp);
    expect(caFingerprint(b.certPem)).not.toBe(fp);
    expect(fp).toBe(new X509Certificate(a.certPem).fingerprint256.replaceAll(':', '').toLowerCase());
  });

  it('reads the node id from a certificate, refusing one that names two different ids', () => {
    expect(nodeIdFromCert({ subject: { CN: 'n1' }, subjectaltname: 'URI:urn:shoal:node:n1, IP Address:127.0.0.1' })).toBe('n1');
    expect(nodeIdFromCert({ subject: { CN: 'n1' }, subjectaltname: 'URI:urn:shoal:node:n2' })).toBeNull();
    expect(nodeIdFromCert({ subject: { CN: 'n1' } })).toBe('n1');
    expect(nodeIdFromCert({ subjectaltname: 'URI:urn:shoal:node:n3' })).toBe('n3');
    expect(nodeIdFromCert({})).toBeNull();
    expect(nodeIdFromCert({ subject: { CN: ['a', 'b'] } })).toBeNull();
  });

  it('works with Node tls for mutual TLS 1.3, and the peer certificate names the node', { timeout: 10_000 }, async () => {
    const ca = await createCa('c1');
    const server = await issueNodeCert(ca, 'srv', { hosts: ['127.0.0.1'] });
    const client = await issueNodeCert(ca, 'cli', { hosts: ['127.0.0.1'] });
    const seen: (string | null)[] = [];
    const srv = tls.createServer({
      ca: ca.certPem, cert: server.certPem, key: server.keyPem,
      minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: true,
    }, (sock) => {
      seen.push(nodeIdFromCert(sock.getPeerCertificate()));
      sock.end('hi');
    });
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    const { port } = srv.address() as AddressInfo;
    const sock = tls.connect({
      host: '127.0.0.1', port, ca: ca.certPem, cert: client.certPem, key: client.keyPem,
      minVersion: 'TLSv1.3', rejectUnauthorized: true,
    });
    await once(sock, 'secureConnect');
    expect(sock.authorized).toBe(true);
    expect(nodeIdFromCert(sock.getPeerCertificate())).toBe('srv');
    let text = '';
    sock.setEncoding('utf8').on('data', (d: string) => (text += d));
    await once(sock, 'end');
    expect(text).toBe('hi');
    sock.destroy();
    srv.close();
    expect(seen).toEqual(['cli']);
  });
});
