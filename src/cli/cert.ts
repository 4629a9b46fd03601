// shoal cert: the deny-list of certificate serials. revoke puts one certificate on it (a client
// certificate that leaked, a node's old certificate); revoked lists what is on it.

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr } from './client.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { parseSerial, revocationReasonBytesMax, revokedSerialsMax } from '../security/revoked-serials.ts';

export const certRevokeHelp = `Usage: shoal cert revoke SERIAL [--reason TEXT] [--addr HOST:PORT] [--json]
       shoal cert revoke --cert FILE [--reason TEXT] [--addr HOST:PORT] [--json]

Revokes one certificate of this cluster's CA (admin). Every node refuses it from then on, at
each handshake: the client API answers 401 unauthenticated (reason revoked), the peer transport
refuses a node presenting it (refusal revoked), POST /v1/join/renew will not renew it; and
connections already open with it are closed at once.

SERIAL is the certificate's serial in hex (any case, colons allowed): 'shoal events --type
token,certificate' shows the serials of certificates given out; 'openssl x509 -noout -serial
-in FILE' prints a file's. With --cert the certificate itself is sent (a PEM file, or a
credential file with a client certificate): its serial and expiry are read from it, and a
client certificate's entry is dropped from the list once the certificate has expired.
Otherwise the entry stays until the CA expires.

To stop a node, use 'shoal cluster remove': it refuses every certificate the node ever had.
Revoking the certificate a node uses now cuts that node off (it cannot renew it).

Options:
  --cert FILE        the certificate to revoke, instead of SERIAL
  --reason TEXT      why, kept with the entry (at most ${revocationReasonBytesMax} characters)
${commonFlagsHelp}

With --json prints the entry {serial, kind, expiresAtMs, revokedAtMs, revokedBy, added, ...}.
${clientExitCodes} A full list (${revokedSerialsMax} unexpired entries) exits 1 (limit_reached).`;

export const certRevokedHelp = `Usage: shoal cert revoked [--addr HOST:PORT] [--json]

Lists the revoked certificates (admin), oldest first: serial, kind (client, node, or unknown
when only the serial was given), when and by whom, until when the entry is kept, and why.

Options:
${commonFlagsHelp}

With --json prints {items: [...], rev} (GET /v1/certificates/revoked).
${clientExitCodes}`;

export const certRenewHelp = `Usage: shoal cert renew --addr NODE [--revoke-old [--reason TEXT]] [--json]

Has the node at --addr renew its own certificate now (admin), with a new key, as it does by
itself between half and four-fifths of the certificate's lifetime; no restart. With
--revoke-old it then revokes the certificate it used until now: its peers close the connections
made with it and the node redials with the new one. That is how a node whose key leaked stays a
member; whoever holds the leaked key could have renewed too before it was revoked ('shoal events
--type certificate' shows every renewal), so when in doubt remove the node and join it again.

Options:
  --revoke-old       revoke the old certificate once the new one is in place
  --reason TEXT      with --revoke-old: why (default "replaced by <new serial>")
${commonFlagsHelp}

With --json prints {nodeId, oldSerial, newSerial, revoked?} (POST /v1/certificates/renew).
${clientExitCodes}`;

const entrySchema = z.object({
  serial: z.string(), kind: z.string(), subject: z.string().optional(), notAfterMs: z.number().optional(), expiresAtMs: z.number(),
  revokedAtMs: z.number(), revokedBy: z.string(), reason: z.string().optional(),
}).loose();

/** The PEM of a certificate file, or of the client certificate in a credential file. */
function certificateOf(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--cert: cannot read ${file}: ${(err as Error).message}`);
  }
  if (text.includes('-----BEGIN CERTIFICATE-----')) {
    // A credential file is JSON with the PEM in "cert"; a PEM file is the PEM.
    try {
      const cred = JSON.parse(text) as { cert?: unknown };
      if (typeof cred.cert === 'string') return cred.cert;
    } catch {
      return text;
    }
  }
  throw new UsageError(`--cert: ${file} holds no certificate (a PEM file, or a credential file with "cert")`);
}

async function revokeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, cert: { type: 'string' }, reason: { type: 'string' } }, certRevokeHelp);
  if (values.help) return help(certRevokeHelp);
  const [serialText, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra.join(' ')}'`);
  if ((serialText === undefined) === (values.cert === undefined)) throw new UsageError('give the SERIAL of the certificate to revoke, or --cert FILE (one of the two)');
  const serial = serialText === undefined ? undefined : parseSerial(serialText);
  if (serial === null) throw new UsageError(`'${serialText ?? ''}' is not a serial: 1 to 40 hex digits (colons allowed)`);
  if (values.reason !== undefined && values.reason.length > revocationReasonBytesMax) throw new UsageError(`--reason is at most ${revocationReasonBytesMax} characters`);
  const body = {
    ...(serial !== undefined ? { serial } : { certPem: certificateOf(values.cert ?? '') }),
    ...(values.reason !== undefined ? { reason: values.reason } : {}),
  };
  const res = await request(resolveAddr(values.addr), 'POST', '/v1/certificates/revoked', entrySchema.extend({ added: z.boolean() }), { body });
  if (values.json) console.log(JSON.stringify(res.body, null, 2));
  else {
    const until = new Date(res.body.expiresAtMs).toISOString();
    console.log(res.body.added ? `revoked certificate ${res.body.serial} (${res.body.kind}); kept on the list until ${until}` : `certificate ${res.body.serial} was already revoked (by ${res.body.revokedBy})`);
  }
  return exitCodes.ok;
}

async function renewCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, 'revoke-old': { type: 'boolean', default: false }, reason: { type: 'string' } }, certRenewHelp);
  if (values.help) return help(certRenewHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.addr === undefined) throw new UsageError('missing --addr NODE: the node whose certificate to renew (it renews its own)');
  if (values.reason !== undefined && !values['revoke-old']) throw new UsageError('--reason goes with --revoke-old');
  const body = { revokeOld: values['revoke-old'], ...(values.reason !== undefined ? { reason: values.reason } : {}) };
  const answer = z.object({ nodeId: z.string(), oldSerial: z.string(), newSerial: z.string(), revoked: entrySchema.optional() }).loose();
  const res = await request(resolveAddr(values.addr), 'POST', '/v1/certificates/renew', answer, { body });
  if (values.json) console.log(JSON.stringify(res.body, null, 2));
  else console.log(`node ${res.body.nodeId}: certificate ${res.body.oldSerial} renewed as ${res.body.newSerial}${res.body.revoked !== undefined ? `; ${res.body.oldSerial} revoked` : ''}`);
  return exitCodes.ok;
}

async function revokedCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, certRevokedHelp);
  if (values.help) return help(certRevokedHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const res = await request(resolveAddr(values.addr), 'GET', '/v1/certificates/revoked', z.object({ items: z.array(entrySchema), rev: z.number() }).loose(), { retry: 'safe' });
  if (values.json) {
    console.log(JSON.stringify(res.body, null, 2));
    return exitCodes.ok;
  }
  const rows = res.body.items.map((e) => [
    e.serial, e.kind, new Date(e.revokedAtMs).toISOString(), e.revokedBy, new Date(e.expiresAtMs).toISOString(), e.subject ?? '-', e.reason ?? '-',
  ]);
  const head = ['SERIAL', 'KIND', 'REVOKED', 'BY', 'KEPT UNTIL', 'SUBJECT', 'REASON'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd());
  return exitCodes.ok;
}

export const certGroup: Group = {
  name: 'cert',
  about: 'Revoked certificates: refuse one certificate of the cluster CA by its serial (a leaked client certificate, a node\'s old one), and list those refused.',
  subcommands: {
    revoke: { summary: 'revoke one certificate by serial (or --cert FILE)', help: certRevokeHelp, run: revokeCommand },
    revoked: { summary: 'list the revoked certificates', help: certRevokedHelp, run: revokedCommand },
    renew: { summary: "have a node renew its certificate now (--revoke-old: and revoke the old one)", help: certRenewHelp, run: renewCommand },
  },
};

export const certGroupHelp = groupHelp(certGroup);

export function certCommand(argv: string[]): Promise<number> {
  return runGroup(certGroup, argv);
}
