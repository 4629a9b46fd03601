// shoal login: exchanges a client token for a client certificate, with a key made here, and
// writes the credential where the CLI finds it by itself ($SHOAL_CONFIG, else ~/.config/shoal/).

import { X509Certificate } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import path from 'node:path';
import { ShoalError } from '../errors.ts';
import { isValidId } from '../security/identity.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { checkHostPort } from './client.ts';
import { fetchCheckedCa, joinAnswerSchema, joinRequest } from './join-client.ts';
import { tokenFlag } from './join.ts';

export const loginHelp = `Usage: shoal login ADDR --token TOKEN [--name NAME] [--json]

Logs this user in to the cluster that ADDR (any member's client API) belongs to, with a token
from 'shoal token create --role client': checks the cluster CA against the token (ca_mismatch
stops here, nothing sent), makes a key here, and has the leader sign a client certificate for it
(CN the name, OU the token's role). Writes the credential to $SHOAL_CONFIG, else
~/.config/shoal/, where every shoal command finds it.

Options:
  --token TOKEN      the client token (required)
  --name NAME        the principal the certificate names (default: your user name)
  --json             print what was written as JSON
  -h, --help         show this help

Exit codes: 0 logged in; 1 refused (token_invalid, ca_mismatch); 2 usage error; 3 ADDR did not
answer, or the cluster cannot serve right now.`;

/** Where the CLI's credential lives: $SHOAL_CONFIG (a directory), else ~/.config/shoal. */
export function credentialDir(): string {
  return process.env.SHOAL_CONFIG || path.join(homedir(), '.config', 'shoal');
}

export interface ClientCredential {
  addr: string;
  clusterId: string;
  principal: string;
  role: string;
  caPem: string;
  certPem: string;
  keyPem: string;
}

/**
 * Writes a client credential. The one place that knows the file layout, so it follows the
 * format the API's authentication settles on (docs/security.md, "Client credentials").
 */
export function saveClientCredential(c: ClientCredential): string {
  const dir = credentialDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, 'ca.crt'), c.caPem);
  writeFileSync(path.join(dir, 'client.crt'), c.certPem);
  writeFileSync(path.join(dir, 'client.key'), c.keyPem, { mode: 0o600 });
  const file = path.join(dir, 'credential.json');
  writeFileSync(file, `${JSON.stringify({ addr: c.addr, clusterId: c.clusterId, principal: c.principal, role: c.role, ca: 'ca.crt', cert: 'client.crt', key: 'client.key' }, null, 2)}\n`, { mode: 0o600 });
  return file;
}

export async function loginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    token: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, loginHelp);
  if (values.help) {
    console.log(loginHelp);
    return exitCodes.ok;
  }
  const [addrArg, ...extra] = positionals;
  if (addrArg === undefined) throw new UsageError("missing ADDR: any member's client API, HOST:PORT");
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra.join(' ')}'`);
  const addr = checkHostPort(addrArg, 'ADDR');
  const token = tokenFlag(values.token);
  const principal = values.name ?? userInfo().username;
  if (!isValidId(principal)) throw new UsageError(`--name '${principal}': 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit`);
  const ca = await fetchCheckedCa(addr, token);
  const { createCsr } = await import('../security/csr.ts');
  const { csrPem, keyPem } = await createCsr(principal);
  const answer = await joinRequest(addr, 'POST', '/v1/join', joinAnswerSchema, { kind: 'ca', caPem: ca.caPem }, { kind: 'client', token: values.token ?? '', csr: csrPem, name: principal });
  if (!new X509Certificate(answer.certPem).checkIssued(new X509Certificate(ca.caPem))) {
    throw new ShoalError('ca_mismatch', `${addr} answered with a certificate the checked CA did not issue; nothing was written`, { addr });
  }
  const role = answer.clientRole ?? 'reader';
  const file = saveClientCredential({ addr, clusterId: answer.clusterId, principal, role, caPem: ca.caPem, certPem: answer.certPem, keyPem });
  if (values.json) console.log(JSON.stringify({ principal, role, clusterId: answer.clusterId, credential: file }));
  else console.log(`logged in to cluster ${answer.clusterId} as ${principal} (${role}); credential: ${file}`);
  return exitCodes.ok;
}
