// When a call gets no answer, why: "cannot reach" is the right message only when nothing
// listens or nothing answers. A closed connection or a failed TLS handshake usually has another
// cause, found here with one small probe each (never resending the request):
//
//   - a body over the node's limit: the node answers 413 and closes the connection while the
//     body is still being sent, and the client may see only the broken pipe. Probed by sending
//     the same request head (Content-Length included) without the body: the node's answer
//     comes before it would read any body, and nothing is carried out.
//   - a certificate not of the pinned CA: the credential is another cluster's, or the cluster
//     rotated its CA since the credential was written. Probed with the node's public
//     GET /v1/join/ca (trusting nothing; it only explains), which names its cluster and the CAs
//     it retired.
//   - plain HTTP to a node that serves HTTPS: the CLI found no credential. Probed with a TLS
//     handshake.

import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { isIP } from 'node:net';
import { splitHostPort } from '../base/host-port.ts';
import { bundleFingerprints } from '../security/ca-bundle.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';
import { exitCodes } from './args.ts';
import { ApiError, apiErrorOf, CliFailure, noAnswerKindOf, UnreachableError, type NoAnswerKind } from './client-errors.ts';
import { configDir } from './contexts.ts';
import { activeCredential, activeCredentialFound, foundLabel, type CredentialFile } from './credential-file.ts';

/** A body this large may be over a node's limit: the smallest limits.bodyBytesMax a config takes. */
export const probedBodyBytesMin = 1024;
const probeTimeoutMs = 2_000;
const probeAnswerBytesMax = 64 * 1024;

/** The request that got no answer, as far as the probes need it. */
export interface SentRequest {
  method: string;
  /** Path and query, as sent. */
  target: string;
  headers: Record<string, string>;
  bodyBytes: number;
  timeoutMs?: number;
}

const trustCodes = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_SIGNATURE_FAILURE', 'CERT_UNTRUSTED',
]);

interface Cause {
  code?: string;
  text: string;
  timedOut: boolean;
}

function causeOf(err: unknown): Cause {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return { text: 'no answer in time', timedOut: true };
  const c = e?.cause;
  if (c?.code !== undefined) return { code: c.code, text: `${c.code}${c.message && !c.message.includes(c.code) ? `: ${c.message}` : ''}`, timedOut: false };
  return { text: c?.message ?? e?.message ?? String(err), timedOut: false };
}

const reasonTexts: Readonly<Record<NoAnswerKind, (c: Cause, sent: SentRequest) => string>> = {
  refused: () => 'nothing listens there (connection refused)',
  timeout: (_c, s) => (s.timeoutMs !== undefined ? `no answer in ${Math.round(s.timeoutMs / 1000)} s` : 'no answer in time'),
  dns: (c) => `the host name does not resolve (${c.text})`,
  network: (c) => `no route to the host (${c.text})`,
  closed: (c) => `the connection was closed before an answer (${c.text})`,
  tls: (c) => `the TLS handshake failed (${c.text})`,
  other: (c) => c.text,
};

/** What to say instead of "cannot reach", when a probe finds the cause; else an UnreachableError with its kind. */
export async function explainNoAnswer(addr: string, sent: SentRequest, err: unknown): Promise<ApiError | UnreachableError | CliFailure> {
  const cause = causeOf(err);
  const kind: NoAnswerKind = cause.timedOut ? 'timeout' : noAnswerKindOf(cause.code);
  const credential = activeCredential();
  if (credential !== null && cause.code !== undefined && trustCodes.has(cause.code)) return caMismatch(addr, cause.code, credential);
  if (kind === 'closed') {
    if (sent.bodyBytes >= probedBodyBytesMin) {
      const answer = await probeWithoutBody(addr, sent, credential);
      if (answer !== undefined) return answer;
    }
    if (credential === null && await speaksTls(addr)) return noCredential(addr);
  }
  return new UnreachableError(addr, reasonTexts[kind](cause, sent), cause.timedOut, kind);
}

// ---- a body over the limit ------------------------------------------------------------------

/** The node's answer to the request head alone (it answers a body over its limit at once), or undefined. */
export function probeWithoutBody(addr: string, sent: SentRequest, credential: CredentialFile | null, timeoutMs = probeTimeoutMs): Promise<ApiError | undefined> {
  const { host, port } = splitHostPort(addr);
  const headers: Record<string, string> = { ...sent.headers, 'content-length': String(sent.bodyBytes) };
  if (credential?.token !== undefined) headers.authorization = `Bearer ${credential.token}`;
  const options = { host, port, method: sent.method, path: sent.target, headers, agent: false as const, timeout: timeoutMs };
  return new Promise((resolve) => {
    const req = credential === null
      ? http.request(options)
      : https.request({ ...options, ...tlsOptions(credential) });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (b: Buffer) => { if (text.length < probeAnswerBytesMax) text += b.toString(); });
      res.on('end', () => {
        req.destroy();
        if ((res.statusCode ?? 0) < 400) return resolve(undefined);
        const answer = apiErrorOf(res.statusCode ?? 0, text, res.statusMessage ?? '', null, addr);
        answer.requestBytes = sent.bodyBytes;
        resolve(answer);
      });
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => {
      req.destroy();
      resolve(undefined);
    });
    req.on('error', () => resolve(undefined));
    // The head only: the node answers a body over its limit before reading any of it.
    req.flushHeaders();
  });
}

function tlsOptions(c: CredentialFile): https.RequestOptions {
  return {
    ca: c.ca, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity,
    ...(c.cert !== undefined && c.key !== undefined ? { cert: c.cert, key: c.key } : {}),
  };
}

// ---- no credential for an HTTPS node -------------------------------------------------------

/** Whether `addr` completes a TLS handshake (trusting nothing: it only tells HTTPS from the rest). */
export function speaksTls(addr: string): Promise<boolean> {
  const { host, port } = splitHostPort(addr);
  return new Promise((resolve) => {
    const socket = tls.connect({ host, port, rejectUnauthorized: false, ...(isIP(host) === 0 ? { servername: host } : {}), timeout: probeTimeoutMs });
    const done = (yes: boolean): void => {
      socket.destroy();
      resolve(yes);
    };
    socket.once('secureConnect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** How to get a credential for `addr`, for a caller that has none. */
export function noCredentialHint(addr: string): string {
  return `get one: on a member of the cluster, as root, shoal login --local --data <its data directory> (an admin credential from the node's CA key); elsewhere shoal login ${addr} --token <a client token: shoal token create --role client>; or pick one: shoal context ls, then shoal context use NAME`;
}

function noCredential(addr: string): CliFailure {
  const { dir } = configDir();
  return new CliFailure(
    `${addr} serves HTTPS, and this command has no credential to call it with: none given (--credential FILE, --context NAME, $SHOAL_CONTEXT) and no current context in ${dir}`,
    exitCodes.failed, 'unauthenticated', { hint: noCredentialHint(addr), details: { reason: 'missing', addr } },
  );
}

// ---- a certificate not of the pinned CA ----------------------------------------------------

interface NodeCa {
  clusterId: string;
  fingerprint?: string;
  retiredFingerprints: string[];
}

/** The node's own account of its cluster and CA (GET /v1/join/ca, public), trusting nothing. */
export function nodeCa(addr: string): Promise<NodeCa | undefined> {
  const { host, port } = splitHostPort(addr);
  return new Promise((resolve) => {
    const req = https.get({ host, port, path: '/v1/join/ca', rejectUnauthorized: false, agent: false, timeout: probeTimeoutMs, headers: { accept: 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (b: Buffer) => { if (text.length < probeAnswerBytesMax) text += b.toString(); });
      res.on('end', () => {
        try {
          const body = JSON.parse(text) as { clusterId?: unknown; fingerprint?: unknown; retiredFingerprints?: unknown };
          if (typeof body.clusterId !== 'string') return resolve(undefined);
          const retired = Array.isArray(body.retiredFingerprints) ? body.retiredFingerprints.filter((f): f is string => typeof f === 'string') : [];
          resolve({ clusterId: body.clusterId, ...(typeof body.fingerprint === 'string' ? { fingerprint: body.fingerprint } : {}), retiredFingerprints: retired });
        } catch {
          resolve(undefined);
        }
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

function pinnedFingerprints(c: CredentialFile): string[] {
  try {
    return bundleFingerprints(c.ca);
  } catch {
    return [];
  }
}

async function caMismatch(addr: string, code: string, credential: CredentialFile): Promise<CliFailure> {
  const found = activeCredentialFound();
  const file = found?.file ?? 'the credential in use';
  const which = found !== undefined ? `${found.file} (${foundLabel(found)})` : 'the credential in use';
  const shown = await nodeCa(addr);
  const rotated = shown !== undefined && pinnedFingerprints(credential).some((f) => shown.retiredFingerprints.includes(f));
  const reason = shown === undefined ? 'unknown' : rotated ? 'ca_rotated' : shown.clusterId !== credential.clusterId ? 'other_cluster' : 'unknown';
  const login = `sign in again: on a member, as root, shoal login --local --data <its data directory>; elsewhere shoal login ${addr} --token <a client token from an admin: shoal token create --role client>`;
  const texts: Record<typeof reason, { message: string; hint: string }> = {
    ca_rotated: {
      message: `${addr} is a node of cluster ${credential.clusterId}, whose CA was replaced (shoal ca rotate) after this credential was made: ${which} still pins the retired CA (${code}); nothing was sent`,
      hint: `${login}. The credential 'shoal ca rotate' ran with was kept up to date; this one was not`,
    },
    other_cluster: {
      message: `${addr} is a node of cluster ${shown?.clusterId ?? '?'}, but ${which} is a credential for cluster ${credential.clusterId}: its certificate is not signed by the CA that credential pins (${code}); nothing was sent`,
      hint: `use the credential of cluster ${shown?.clusterId ?? '?'} (shoal context ls, then --context NAME or shoal context use NAME), or give a node of cluster ${credential.clusterId} with --addr`,
    },
    unknown: {
      message: `${addr}'s certificate is not signed by the CA that ${which} pins (${code}): the node is another cluster's, or the cluster's CA was replaced (shoal ca rotate) since; nothing was sent`,
      hint: `pick the right credential (shoal context ls, --context NAME), or ${login}`,
    },
  };
  return new CliFailure(texts[reason].message, exitCodes.failed, 'ca_mismatch', {
    hint: texts[reason].hint,
    details: { reason, addr, file, pinnedClusterId: credential.clusterId, ...(shown !== undefined ? { clusterId: shown.clusterId } : {}) },
  });
}
