// shoal login: exchanges a client token for a client certificate, with a key made here, and
// adds it as a context, where the CLI finds it by itself (src/cli/contexts.ts). `--local` is
// the other way in, for root of a member: login-local.ts.

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
import { splitHostPort } from '../base/host-port.ts';
import { isClientRole } from '../security/roles.ts';
import { localDataDefault, loginLocal } from './login-local.ts';

export const loginHelp = `Usage: shoal login ADDR --token TOKEN [--name NAME] [--context NAME] [--json]
       shoal login --local [--data DIR] [--name NAME] [--context NAME] [--json]

Logs this user in to the cluster that ADDR (any member's client API) belongs to, with a token
from 'shoal token create --role client': checks the cluster CA against the token (ca_mismatch
stops here, nothing sent), makes a key here, and has the leader sign a client certificate for it
(CN the name, OU the token's role).

With --local, on a member whose data directory DIR this user can read (root, or the user the
node runs as), no token is needed: whoever reads a voter's DIR holds the cluster CA key already.
It signs a short-lived admin certificate with DIR/tls/ca.key, kept in memory only, and with it
asks the node (its API, from DIR/shoal.yaml; it must run) to sign an admin certificate for a key
made here, which the cluster records as a 'certificate.issued' event (principal, role, serial,
node: shoal events --type certificate). The credential names this node's API first, then the
other members'. A learner holds no CA key: it is refused (ca_key_unavailable) with what to do.

Either way the credential is added as a context and made current, where every shoal command
finds it: named --context NAME, else ADDR's host (or, with --local, the node's name); a context
of another cluster with that name is kept and this one gets a suffix (shoal context ls).

Options:
  --token TOKEN      the client token (required without --local)
  --local            an admin credential from this machine's node (see above)
  --data DIR         with --local: the node's data directory (default ${localDataDefault}, as shoal join's)
  --name NAME        the principal the certificate names (default: your user name)
  --context NAME     the name of the context to add
  --json             print what was written as JSON
  -h, --help         show this help

Exit codes: 0 logged in; 1 refused (token_invalid, ca_mismatch; with --local ca_key_unavailable
on a learner, or the CA key unreadable); 2 usage error; 3 ADDR (or with --local, the node) did
not answer, or the cluster cannot serve right now.`;

export async function loginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    token: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    local: { type: 'boolean', default: false }, data: { type: 'string' },
  }, loginHelp);
  if (values.help) {
    console.log(loginHelp);
    return exitCodes.ok;
  }
  if (values.local) return loginLocalCommand(positionals, values);
  if (values.data !== undefined) throw new UsageError('--data goes with --local (a member\'s data directory)');
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

async function loginLocalCommand(positionals: string[], values: { token?: string; name?: string; data?: string; json: boolean }): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`--local takes no ADDR (the node's address comes from its data directory), got '${positionals.join(' ')}'`);
  if (values.token !== undefined) throw new UsageError('--local takes no --token: the node\'s CA key stands for it');
  const done = await loginLocal({ data: values.data ?? localDataDefault, ...(values.name !== undefined ? { name: values.name } : {}) });
  if (values.json) console.log(JSON.stringify({ ...done, role: 'admin' }));
  else {
    console.log(`logged in to cluster ${done.clusterId} as ${done.principal} (admin) through node ${done.node.name}, with its CA key; certificate ${done.serial}, recorded as a certificate.issued event (shoal events --type certificate)
context ${done.context} (current): ${done.credential}`);
  }
  return exitCodes.ok;
}
