// shoal join, login and token against one in-memory node's API on a real port (no cluster):
// join checks the CA against the token before it sends anything, writes a data directory whose
// key never left this process, and leaves nothing behind when refused; a man in the middle
// showing another CA gets no token and no request.

import { X509Certificate, createPrivateKey } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SingleNode } from '../api/single-node.ts';
import { caNode } from './ca-node.ts';
import { inProcess } from '../cli/in-process.ts';
import { createCa, type PemPair } from '../../src/security/certificates.ts';
import { loadIdentity } from '../../src/node/identity.ts';
import { credentialFileSchema } from '../../src/cli/credential-file.ts';

let n: SingleNode;
let ca: PemPair;
let addr: string;
const tmp = (): string => mkdtempSync(path.join(os.tmpdir(), 'shoal-join-'));

beforeAll(async () => {
  ({ n, ca, addr } = await caNode());
});
afterAll(async () => { await n.close(); });

async function token(...flags: string[]): Promise<string> {
  const r = await inProcess('token', 'create', ...flags, '--addr', addr);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe('shoal join', () => {
  it('joins with a token: checked CA, a key made here, a certificate for it, a config that joins through ADDR', async () => {
    const t = await token('--role', 'voter', '--label', 'rack=2');
    const dir = path.join(tmp(), 'n2');
    const r = await inProcess('join', addr, '--token', t, '--name', 'n2', '--data', dir, '--api', '127.0.0.1:7400', '--peer', '127.0.0.1:7500', '--no-start', '--json');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { nodeId: string; role: string };
    expect(out.role).toBe('voter');
    const identity = loadIdentity(dir);
    expect(identity).toMatchObject({ id: out.nodeId, name: 'n2', clusterId: 'test-cluster' });
    const cert = new X509Certificate(readFileSync(path.join(dir, 'tls', 'node.crt')));
    const key = createPrivateKey(readFileSync(path.join(dir, 'tls', 'node.key')));
    expect(cert.checkPrivateKey(key)).toBe(true);
    expect(cert.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(existsSync(path.join(dir, 'tls', 'ca.key'))).toBe(false);
    expect(readFileSync(path.join(dir, 'tls', 'ca.crt'), 'utf8')).toBe(ca.certPem);
    expect(parseYaml(readFileSync(path.join(dir, 'shoal.yaml'), 'utf8'))).toEqual({ dataDir: '.', api: { listen: '127.0.0.1:7400' }, peer: { listen: '127.0.0.1:7500' }, join: { api: addr } });
    expect(n.node.membership.get(out.nodeId)).toEqual({ id: out.nodeId, name: 'n2', peerAddress: '127.0.0.1:7500', apiAddress: '127.0.0.1:7400' });
    // The token is spent: a second machine is refused and writes nothing.
    const again = path.join(tmp(), 'n3');
    const replay = await inProcess('join', addr, '--token', t, '--name', 'n3', '--data', again, '--no-start', '--json');
    expect(replay.code).toBe(1);
    expect(JSON.parse(replay.stderr)).toMatchObject({ error: { code: 'token_invalid', details: { reason: 'used' } } });
    expect(existsSync(again)).toBe(false);
    const ls = await inProcess('token', 'ls', '--addr', addr);
    expect(ls.stdout).toMatch(/voter\s+used\s+0\/1\s+\S+\s+rack=2\s+n2/);
  });

  it('stops at a CA that is not the token\'s (a man in the middle): ca_mismatch, no token sent, nothing written', async () => {
    const t = await token('--role', 'voter');
    const impostor = await createCa('impostor');
    const seen: string[] = [];
    const mitm: Server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => {
        if (body.includes('SHOAL1-')) seen.push('token received');
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ clusterId: 'test-cluster', caPem: impostor.certPem }));
      });
    });
    await new Promise<void>((r) => mitm.listen(0, '127.0.0.1', r));
    try {
      const dir = path.join(tmp(), 'n4');
      const r = await inProcess('join', `127.0.0.1:${(mitm.address() as AddressInfo).port}`, '--token', t, '--name', 'n4', '--data', dir, '--no-start', '--json');
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stderr)).toMatchObject({ error: { code: 'ca_mismatch' } });
      expect(seen).toEqual(['GET /v1/join/ca']);
      expect(existsSync(dir)).toBe(false);
    } finally {
      mitm.close();
    }
  });

  it('refuses a malformed token before it reaches anything', async () => {
    const r = await inProcess('join', '127.0.0.1:9', '--token', 'SHOAL1-garbage', '--data', path.join(tmp(), 'x'), '--no-start', '--json');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr)).toMatchObject({ error: { code: 'token_invalid', details: { reason: 'malformed' } } });
  });
});

describe('shoal login', () => {
  it('exchanges a client token for a client certificate with the token\'s role, written where the CLI looks', async () => {
    const t = await token('--role', 'client', '--client-role', 'operator');
    const dir = tmp();
    const before = process.env.SHOAL_CONFIG;
    process.env.SHOAL_CONFIG = dir;
    try {
      const r = await inProcess('login', addr, '--token', t, '--name', 'alice', '--json');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ principal: 'alice', role: 'operator', context: '127.0.0.1', credential: path.join(dir, 'contexts', '127.0.0.1.json') });
    } finally {
      if (before === undefined) delete process.env.SHOAL_CONFIG;
      else process.env.SHOAL_CONFIG = before;
    }
    // A context the CLI finds by itself (src/cli/contexts.ts), named after ADDR's host, the CA pinned.
    const credential = credentialFileSchema.parse(JSON.parse(readFileSync(path.join(dir, 'contexts', '127.0.0.1.json'), 'utf8')));
    expect(credential).toMatchObject({ version: 1, clusterId: 'test-cluster', ca: ca.certPem, addresses: [addr], principal: 'alice', role: 'operator' });
    const cert = new X509Certificate(credential.cert ?? '');
    expect(cert.subject).toContain('CN=alice');
    expect(cert.subject).toContain('OU=operator');
    expect(cert.checkPrivateKey(createPrivateKey(credential.key ?? ''))).toBe(true);
  });
});
