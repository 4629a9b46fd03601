// shoal login: exchanges a client token for a client certificate, with a key made here, and
// adds it as a context, where the CLI finds it by itself (src/cli/contexts.ts).

import { userInfo } from 'node:os';
import { ShoalError } from '../errors.ts';
import { issuerIn } from '../security/ca-bundle.ts';
import { isValidPrincipal, principalRule } from '../security/principal.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { checkHostPort } from './client.ts';
import { fetchCheckedCa, joinAnswerSchema, joinRequest } from './join-client.ts';
import { tokenFlag } from './join.ts';
import { saveUserContext } from './credential-file.ts';
import { contextNameFrom } from './contexts.ts';
import { splitHostPort } from '../node/host-port.ts';
import { isClientRole } from '../security/roles.ts';

export const loginHelp = `Usage: shoal login ADDR --token TOKEN [--name NAME] [--context NAME] [--json]

Logs this user in to the cluster that ADDR (any member's client API) belongs to, with a token
from 'shoal token create --role client': checks the cluster CA against the token (ca_mismatch
stops here, nothing sent), makes a key here, and has the leader sign a client certificate for it
(CN the name, OU the token's role). Adds the credential as a context and makes it current,
where every shoal command finds it: named --context NAME, else ADDR's host; a context of another
cluster with that name is kept and this one gets a suffix (shoal context ls).

Options:
  --token TOKEN      the client token (required)
  --name NAME        the principal the certificate names (default: your user name)
  --context NAME     the name of the context to add
  --json             print what was written as JSON
  -h, --help         show this help

Exit codes: 0 logged in; 1 refused (token_invalid, ca_mismatch); 2 usage error; 3 ADDR did not
answer, or the cluster cannot serve right now.`;

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
  if (!isValidPrincipal(principal)) throw new UsageError(`--name '${principal}': a principal is ${principalRule}`);
  const ca = await fetchCheckedCa(addr, token);
  const { createCsr } = await import('../security/csr.ts');
  const { csrPem, keyPem } = await createCsr(principal);
  const answer = await joinRequest(addr, 'POST', '/v1/join', joinAnswerSchema, { kind: 'ca', caPem: ca.caPem }, { kind: 'client', token: values.token ?? '', csr: csrPem, name: principal });
  if (issuerIn(answer.certPem, ca.caPem) === undefined) {
    throw new ShoalError('ca_mismatch', `${addr} answered with a certificate the checked CA did not issue; nothing was written`, { addr });
  }
  const role = answer.clientRole ?? 'reader';
  if (!isClientRole(role)) throw new ShoalError('internal', `${addr} answered with an unknown role '${role}'`);
  // A context the CLI finds by itself (src/cli/contexts.ts): the CA pinned, this address first.
  const added = saveUserContext({ version: 1, clusterId: answer.clusterId, ca: ca.caPem, addresses: [addr], principal, role, cert: answer.certPem, key: keyPem }, contextNameFrom(splitHostPort(addr).host));
  if (values.json) console.log(JSON.stringify({ principal, role, clusterId: answer.clusterId, context: added.name, credential: added.file }));
  else console.log(`logged in to cluster ${answer.clusterId} as ${principal} (${role}); context ${added.name} (current): ${added.file}`);
  return exitCodes.ok;
}
