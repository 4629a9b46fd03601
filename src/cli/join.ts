// shoal join: one command on a new machine. It checks the cluster's CA against the token, makes
// its node key here (the private key never leaves the machine), has the leader redeem the token
// and sign a certificate request, writes the data directory and config, and runs the node as
// `shoal serve` does (unless --no-start). The node joins as a learner; with a voter token the
// leader's autopilot makes it a voter once it has caught up.

import { X509Certificate } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import type { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { isInitialized, newId, nodeNamePattern, nodeNameRule, writeJoinedNode } from '../node/identity.ts';
import { issuerIn } from '../security/ca-bundle.ts';
import { parseToken, refusalText, type ParsedToken } from '../security/tokens.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { ApiError, checkHostPort } from './client.ts';
import { initApiDefault, initPeerDefault } from './init.ts';
import { fetchCheckedCa, joinAnswerSchema, joinRequest } from './join-client.ts';

export const joinHelp = `Usage: shoal join ADDR --token TOKEN [--name NAME] [--data DIR] [--api HOST:PORT] [--peer HOST:PORT] [--no-start] [--json]

Joins this machine to the cluster that ADDR (any member's client API) belongs to, with a token
from 'shoal token create --role voter|learner' (or the command 'shoal init' printed):

  1. fetches the cluster CA from ADDR and checks its SHA-256 against the token (a mismatch stops
     here: ca_mismatch, nothing sent, nothing written);
  2. makes this node's id and key here and sends only a certificate request;
  3. the leader redeems the token, signs the certificate and adds the node as a learner;
  4. writes DIR (identity, certificates, DIR/shoal.yaml) and runs the node as 'shoal serve'.

With a voter token the leader makes the node a voter once it has caught up and stayed healthy
(autopilot.stabilizationMs, default 10 s).

Options:
  --token TOKEN      the join token (required)
  --name NAME        this node's name, unique in the cluster (default: the host name): ${nodeNameRule}
  --data DIR         data directory to create (default ./shoal-data)
  --api HOST:PORT    client API listen address (default ${initApiDefault}); other members reach it here
  --peer HOST:PORT   peer transport listen address (default ${initPeerDefault})
  --no-start         write DIR and exit; start it later with 'shoal serve --config DIR/shoal.yaml'
  --json             print what was written as JSON (and log as JSON)
  -h, --help         show this help

Exit codes: 0 joined (with --no-start) or the node stopped cleanly; 1 refused (token_invalid,
ca_mismatch, already_exists: the message says why; nothing written); 2 usage error, or DIR is
already initialized; 3 ADDR did not answer, or the cluster cannot serve right now; otherwise
those of 'shoal serve'.`;

/** The host name as a node name, when it is one. */
function defaultName(): string {
  const h = hostname().toLowerCase().split('.')[0]?.replace(/[^a-z0-9-]/g, '-') ?? '';
  return nodeNamePattern.test(h) ? h : 'node';
}

export function tokenFlag(value: string | undefined): ParsedToken {
  if (value === undefined) throw new UsageError('missing --token TOKEN (make one with shoal token create)');
  const token = parseToken(value);
  if (token === null) throw new ShoalError('token_invalid', refusalText.malformed, { reason: 'malformed' });
  return token;
}

/** How often a join asked while the cluster has no leader is asked again, a second apart. */
const joinNoLeaderAttemptsMax = 20;

interface JoinFlags { addr: string; token: string; parsed: ParsedToken; name: string; data: string; api: string; peer: string }

/** Everything up to a written data directory; returns the config file to serve. */
export async function joinAndWrite(f: JoinFlags): Promise<{ configFile: string; nodeId: string; clusterId: string; role: string }> {
  if (isInitialized(f.data)) throw new UsageError(`${f.data} is already initialized; a joining node needs a new --data directory`);
  const ca = await fetchCheckedCa(f.addr, f.parsed);
  const nodeId = newId();
  const { createCsr } = await import('../security/csr.ts');
  const { csrPem, keyPem } = await createCsr(nodeId);
  const body = { kind: 'node', token: f.token, csr: csrPem, nodeId, name: f.name, peerAddress: f.peer, apiAddress: f.api };
  // no_leader: the cluster is electing (a node that just founded it, a leader change); the
  // redemption did not happen, so asking again a few times is safe.
  let answer: z.infer<typeof joinAnswerSchema> | undefined;
  for (let attempt = 1; answer === undefined; attempt++) {
    try {
      answer = await joinRequest(f.addr, 'POST', '/v1/join', joinAnswerSchema, { kind: 'ca', caPem: ca.caPem }, body);
    } catch (err) {
      if (!(err instanceof ApiError) || err.body.code !== 'no_leader' || attempt >= joinNoLeaderAttemptsMax) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  const cert = new X509Certificate(answer.certPem);
  if (answer.caPem !== ca.caPem || issuerIn(answer.certPem, ca.caPem) === undefined || !cert.subject.includes(`CN=${nodeId}`)) {
    throw new ShoalError('ca_mismatch', `${f.addr} answered with a certificate the checked CA did not issue for this node; nothing was written`, { addr: f.addr });
  }
  writeJoinedNode(f.data, { id: nodeId, name: f.name, clusterId: answer.clusterId }, { caPem: ca.caPem, certPem: answer.certPem, keyPem });
  const configFile = path.join(f.data, 'shoal.yaml');
  if (!existsSync(configFile)) writeFileSync(configFile, stringify({ dataDir: '.', api: { listen: f.api }, peer: { listen: f.peer }, join: { api: f.addr } }));
  return { configFile, nodeId, clusterId: answer.clusterId, role: answer.role };
}

export async function joinCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    token: { type: 'string' }, name: { type: 'string' }, data: { type: 'string', default: 'shoal-data' },
    api: { type: 'string', default: initApiDefault }, peer: { type: 'string', default: initPeerDefault },
    'no-start': { type: 'boolean', default: false }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, joinHelp);
  if (values.help) {
    console.log(joinHelp);
    return exitCodes.ok;
  }
  const [addr, ...extra] = positionals;
  if (addr === undefined) throw new UsageError("missing ADDR: any member's client API, HOST:PORT");
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra.join(' ')}'`);
  const parsed = tokenFlag(values.token);
  const name = values.name ?? defaultName();
  if (!nodeNamePattern.test(name)) throw new UsageError(`--name '${name}': a node name is ${nodeNameRule}`);
  const flags: JoinFlags = {
    addr: checkHostPort(addr, 'ADDR'), token: values.token ?? '', parsed, name, data: values.data,
    api: checkHostPort(values.api, '--api'), peer: checkHostPort(values.peer, '--peer'),
  };
  if (flags.api === flags.peer) throw new UsageError('--api and --peer must differ (each needs its own port)');
  const joined = await joinAndWrite(flags);
  if (values.json) console.log(JSON.stringify({ ...joined, name, dataDir: path.resolve(flags.data) }));
  else console.log(`joined cluster ${joined.clusterId} as ${name} (${joined.nodeId}), a learner${joined.role === 'voter' ? ' to be made a voter once caught up' : ''}\nconfig: ${joined.configFile}`);
  if (values['no-start']) return exitCodes.ok;
  const { serveCommand } = await import('./serve.ts');
  return serveCommand(['--config', joined.configFile, ...(values.json ? ['--json'] : [])]);
}
