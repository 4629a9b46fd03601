// How the CLI classifies a call that got no answer and what it says for each failure, without a
// node (src/cli/no-answer.ts, failure-report.ts): every kind of "cannot reach" with its advice,
// a certificate of another CA when the node cannot be asked why, and the credential named (its
// file and context) when the API refuses it. test/cli/client-failures.test.ts runs the causes
// against a real node.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { ApiError, CliFailure, reportFailure, UnreachableError, type ClientFailure } from '../../src/cli/client.ts';
import { addContext } from '../../src/cli/contexts.ts';
import { useCredentialFlags, type CredentialFile } from '../../src/cli/credential-file.ts';
import { explainNoAnswer, type SentRequest } from '../../src/cli/no-answer.ts';
import { createCa } from '../../src/security/certificates.ts';

const saved = process.env.SHOAL_CONFIG;
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-messages-'));
  process.env.SHOAL_CONFIG = dir;
  useCredentialFlags({});
});
afterEach(() => {
  process.env.SHOAL_CONFIG = saved;
  useCredentialFlags({});
});

const fetchFailed = (code: string, message = code): TypeError => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(message), { code }) });
const get: SentRequest = { method: 'GET', target: '/v1/cluster', headers: {}, bodyBytes: 0 };

function printed(err: ClientFailure, json = false): string {
  let out = '';
  const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { out += `${a.join(' ')}\n`; });
  try {
    reportFailure('status', err, json);
  } finally {
    spy.mockRestore();
  }
  return out;
}

async function withContext(more: Partial<CredentialFile> = {}): Promise<CredentialFile> {
  const ca = await createCa('c1');
  const credential: CredentialFile = { version: 1, clusterId: 'c1', ca: ca.certPem, addresses: ['10.0.0.1:7100'], principal: 'alice', role: 'operator', token: `shoal_0123456789abcdef.${'a'.repeat(43)}`, ...more };
  addContext(dir, credential, 'lab');
  return credential;
}

describe('no answer, by kind', () => {
  it('refused, unresolved, no route, timed out, closed and a TLS failure each say so, with their advice (exit 3)', async () => {
    await withContext();
    const cases: [Error, string, RegExp][] = [
      [fetchFailed('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.9:7100'), 'nothing listens there (connection refused)', /^is a node running there\?/],
      [fetchFailed('ENOTFOUND', 'getaddrinfo ENOTFOUND nohost'), 'the host name does not resolve (ENOTFOUND)', /check the host name/],
      [fetchFailed('EHOSTUNREACH'), 'no route to the host (EHOSTUNREACH)', /network to the node is down/],
      [Object.assign(new Error('t'), { name: 'TimeoutError' }), 'no answer in 15 s', /down, overloaded or cut off/],
      [fetchFailed('ECONNRESET'), 'the connection was closed before an answer (ECONNRESET)', /client API \(not its peer port\)/],
      [fetchFailed('CERT_HAS_EXPIRED', 'certificate has expired'), 'the TLS handshake failed (CERT_HAS_EXPIRED: certificate has expired)', /check its clock and its certificate/],
    ];
    for (const [err, reason, hint] of cases) {
      const e = await explainNoAnswer('10.0.0.9:7100', { ...get, timeoutMs: 15_000 }, err);
      expect(e, reason).toBeInstanceOf(UnreachableError);
      expect(e.message).toBe(`cannot reach 10.0.0.9:7100: ${reason}`);
      const out = JSON.parse(printed(e, true)) as { error: { code: string; hint: string }; exitCode: number };
      expect(out).toMatchObject({ error: { code: 'unreachable' }, exitCode: 3 });
      expect(out.error.hint).toMatch(hint);
    }
  });

  it('refused with no credential at all says where the CLI looked, and how to get a credential', async () => {
    const e = await explainNoAnswer('127.0.0.1:7101', get, fetchFailed('ECONNREFUSED'));
    const out = printed(e);
    expect(out).toContain("No credential was found, so the CLI tried 127.0.0.1:7101 (shoal dev's first node): a node made by shoal init or shoal join listens on 7100 and serves HTTPS");
    expect(out).toContain('shoal login --local --data <its data directory>');
  });

  it('closed, with no credential and nothing speaking TLS there, stays "cannot reach"', async () => {
    const port = await freePort();
    const e = await explainNoAnswer(`127.0.0.1:${port}`, get, fetchFailed('UND_ERR_SOCKET', 'other side closed'));
    expect(e).toMatchObject({ kind: 'closed' });
  });
});

describe('a certificate not of the pinned CA', () => {
  it('when the node cannot be asked which cluster it is: both possible causes, the file and the context (exit 1)', async () => {
    await withContext();
    const port = await freePort();
    const e = await explainNoAnswer(`127.0.0.1:${port}`, get, fetchFailed('SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain'));
    expect(e).toBeInstanceOf(CliFailure);
    const file = path.join(dir, 'contexts', 'lab.json');
    expect(e.message).toBe(`127.0.0.1:${port}'s certificate is not signed by the CA that ${file} (context lab, the current one in $SHOAL_CONFIG) pins (SELF_SIGNED_CERT_IN_CHAIN): the node is another cluster's, or the cluster's CA was replaced (shoal ca rotate) since; nothing was sent`);
    expect(JSON.parse(printed(e, true))).toMatchObject({ error: { code: 'ca_mismatch', reason: 'unknown', file, pinnedClusterId: 'c1' }, exitCode: 1 });
  });
});

describe('answers that name the credential', () => {
  it('a refused credential: its file, context, principal, role, and what to do for the reason', async () => {
    await withContext();
    const refused = (reason: string): string => printed(new ApiError(401, { code: 'unauthenticated', message: 'refused', details: { reason } }, '10.0.0.1:7100'));
    const file = path.join(dir, 'contexts', 'lab.json');
    expect(refused('token')).toContain(`the node refused the credential ${file} (context lab, the current one in $SHOAL_CONFIG): alice, operator; its bearer token is unknown to this cluster, revoked, or mistyped`);
    expect(refused('untrusted_ca')).toContain('retired (shoal ca rotate): sign in again');
    expect(refused('certificate')).toContain("another cluster's, or expired");
    useCredentialFlags({ context: 'lab' });
    expect(refused('token')).toContain(`${file} (context lab, --context)`);
    const forbidden = printed(new ApiError(403, { code: 'forbidden', message: 'no', details: { needed: 'admin', role: 'operator' } }, '10.0.0.1:7100'));
    expect(forbidden).toContain(`ask an admin for a credential with role admin (shoal credential create); this one is ${file} (context lab, --context): alice, operator`);
  });

  it('with no credential, a 401 says how to get one rather than "found no credential"', () => {
    const out = printed(new ApiError(401, { code: 'unauthenticated', message: 'this API needs a credential', details: { reason: 'missing' } }, '10.0.0.1:7100'));
    expect(out).toContain('get one: on a member of the cluster, as root, shoal login --local');
    expect(out).not.toContain('found no credential');
  });

  it('a 413 from a node that does not name its limit still says the default and both ways out', () => {
    const old = new ApiError(413, { code: 'payload_too_large', message: 'Request body is too large' }, '10.0.0.1:7100');
    old.requestBytes = 2_000_000;
    expect(printed(old)).toContain("the body sent was 2000000 bytes, over 10.0.0.1:7100's limits.bodyBytesMax (1048576 bytes (1 MiB) unless its config raises it). Split it");
    const secret = new ApiError(413, { code: 'payload_too_large', message: 'too big', details: { limit: 'secretValueBytesMax', max: 65536 } }, '10.0.0.1:7100');
    expect(printed(secret)).toContain('over secretValueBytesMax (65536 bytes)');
  });
});
