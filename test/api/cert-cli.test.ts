// shoal cert revoke and shoal cert revoked against a single node listening on loopback (in this
// process) that holds a test CA: by serial, by a certificate file or a credential file, twice,
// and the listing.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryCaAuthority } from '../../src/security/authority.ts';
import { createCa, type PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { serialKey } from '../../src/security/revoked-serials.ts';
import { inProcess } from '../cli/in-process.ts';
import { listeningSingleNode, type SingleNode } from './single-node.ts';

let n: SingleNode;
let addr: string;
let ca: PemPair;
let dir: string;

beforeAll(async () => {
  ({ n, addr } = await listeningSingleNode());
  ca = await createCa('test-cluster');
  n.ctx.security = memoryCaAuthority(ca);
  dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-cert-cli-'));
});
afterAll(async () => {
  await n.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('shoal cert', () => {
  it('revokes by serial (colons and upper case taken), once', async () => {
    const r = await inProcess('cert', 'revoke', '0A:1B:2C', '--reason', 'old backup leaked', '--addr', addr);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^revoked certificate 0a1b2c \(unknown\); kept on the list until \d{4}-/);
    const again = await inProcess('cert', 'revoke', '0a1b2c', '--addr', addr);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/was already revoked \(by /);
  });

  it('revokes the client certificate of a credential file, as a client certificate', async () => {
    const bob = await issueClientCert(ca, { principal: 'bob', role: 'reader' });
    const file = path.join(dir, 'bob.json');
    writeFileSync(file, JSON.stringify({ version: 1, clusterId: 'test-cluster', ca: ca.certPem, addresses: [addr], principal: 'bob', role: 'reader', cert: bob.certPem, key: bob.keyPem }));
    const r = await inProcess('cert', 'revoke', '--cert', file, '--json', '--addr', addr);
    expect(r.code, r.stderr).toBe(0);
    const entry = JSON.parse(r.stdout) as { serial: string };
    // Node drops a leading zero byte of a serial (1 certificate in 128): compared as serialKey does.
    expect(serialKey(entry.serial)).toBe(serialKey(bob.serial));
    expect(entry).toMatchObject({ kind: 'client', subject: expect.stringContaining('CN=bob'), added: true });
  });

  it('refuses a file with no certificate (a token credential holds only the CA): usage error, nothing revoked', async () => {
    const file = path.join(dir, 'token.json');
    writeFileSync(file, JSON.stringify({ version: 1, clusterId: 'test-cluster', ca: ca.certPem, addresses: [addr], principal: 'p', role: 'reader', token: 'shoal_x' }));
    const r = await inProcess('cert', 'revoke', '--cert', file, '--addr', addr);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('holds no certificate');
    const bad = await inProcess('cert', 'revoke', 'nothex', '--addr', addr);
    expect(bad.code).toBe(2);
  });

  it('lists the revoked certificates, oldest first', async () => {
    const r = await inProcess('cert', 'revoked', '--addr', addr);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^SERIAL\s+KIND\s+REVOKED\s+BY\s+KEPT UNTIL\s+SUBJECT\s+REASON$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([['0a1b2c', 'unknown'], [expect.any(String), 'client']]);
    const json = await inProcess('cert', 'revoked', '--json', '--addr', addr);
    expect((JSON.parse(json.stdout) as { items: unknown[] }).items).toHaveLength(2);
  });
});
