// shoal login --local: root of a member gets an admin credential for that machine in one step.
// Whoever can read a voter's data directory holds the cluster CA key already, so nothing is
// given away: the command signs a short-lived admin certificate with that key (in memory only)
// and with it asks the node itself for the real one (POST /v1/ca/client-cert, for a key made
// here), so the cluster signs and records it (a `certificate.issued` event: who, role, serial,
// which node). Then it adds the credential as a context. A node without the CA key (a learner)
// is refused, with what to do instead.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { loadConfig } from '../server/config.ts';
import { splitHostPort } from '../base/host-port.ts';
import { isInitialized, loadIdentity, type Identity } from '../node/identity.ts';
import { leafOf } from '../security/ca-bundle.ts';
import { isValidPrincipal, principalRule } from '../security/principal.ts';
import { exitCodes, UsageError } from './args.ts';
import { CliFailure, request, UnreachableError } from './client.ts';
import { contextNameFrom } from './contexts.ts';
import { saveUserContext, useCredentialInMemory, type CredentialFile } from './credential-file.ts';
import { localPrincipal } from './credential-issue.ts';

/** The data directory `shoal join` makes by default, and so where `login --local` looks by default. */
export const localDataDefault = './shoal-data';

const issuedSchema = z.object({ certPem: z.string(), serial: z.string(), principal: z.string(), role: z.string() }).loose();
const membersSchema = z.object({ members: z.array(z.object({ id: z.string(), apiAddress: z.string() }).loose()) }).loose();
type Members = z.infer<typeof membersSchema>['members'];

export interface LocalLogin {
  clusterId: string;
  node: { id: string; name: string };
  principal: string;
  serial: string;
  context: string;
  credential: string;
  addresses: string[];
}

/** The address this machine reaches its node's API at: a wildcard listen address is dialled on loopback. */
export function localApiAddress(listen: string): string {
  const { host, port } = splitHostPort(listen);
  if (host === '0.0.0.0' || host === '') return `127.0.0.1:${port}`;
  if (host === '::') return `[::1]:${port}`;
  return listen;
}

function noKeyFailure(dir: string, identity: Identity): CliFailure {
  return new CliFailure(
    `${dir} holds no cluster CA key (tls/ca.key): node ${identity.name} is a learner, or a voter that has not received the key yet (a voter gets it within seconds of its promotion). Only a voter's data directory can sign an admin credential; nothing was written`,
    exitCodes.failed, 'ca_key_unavailable',
    {
      hint: "on a voter, as root: shoal login --local --data <its data directory>; or, where an admin credential works: shoal token create --role client --client-role admin, then here: shoal login <a member's API> --token <that token>",
      details: { dataDir: dir, node: identity.id },
    },
  );
}

function readCaKey(dir: string, identity: Identity): string {
  const file = path.join(dir, 'tls', 'ca.key');
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && existsSync(`${file}.sealed`)) {
      throw new CliFailure(`${file} is sealed with the cluster's unlock key (autolock): it cannot be read from the disk; nothing was written`, exitCodes.failed, 'ca_key_unavailable', {
        hint: "where an admin credential works: shoal token create --role client --client-role admin, then here: shoal login <a member's API> --token <that token>",
        details: { dataDir: dir, node: identity.id },
      });
    }
    if (code === 'ENOENT') throw noKeyFailure(dir, identity);
    throw new CliFailure(
      `cannot read ${file}: ${code === 'EACCES' ? 'permission denied' : (err as Error).message}; nothing was written`, exitCodes.failed, 'failed',
      { hint: `run it as the user the node runs as (root for a node set up with 'shoal install'): sudo shoal login --local --data ${dir}` },
    );
  }
}

function checkDataDir(data: string): { dir: string; identity: Identity; configFile: string } {
  const dir = path.resolve(data);
  if (!isInitialized(dir)) {
    throw new UsageError(`--data ${data}: not a node's data directory (no node.json there); give the directory the node runs from (the default is ${localDataDefault}, as for shoal join)`);
  }
  return { dir, identity: loadIdentity(dir), configFile: path.join(dir, 'shoal.yaml') };
}

/** Asks the node for the real certificate, authenticated by the short-lived one signed here. */
async function issueThroughNode(addr: string, bootstrap: CredentialFile, principal: string, configFile: string): Promise<{ certPem: string; keyPem: string; serial: string; members: Members }> {
  useCredentialInMemory(bootstrap);
  const { createCsr } = await import('../security/csr.ts');
  const { csrPem, keyPem } = await createCsr(principal);
  try {
    const issued = (await request(addr, 'POST', '/v1/ca/client-cert', issuedSchema, { body: { csr: csrPem }, timeoutMs: 15_000 })).body;
    const view = await request(addr, 'GET', '/v1/cluster', membersSchema, { query: { consistency: 'stale' }, timeoutMs: 5_000 }).then((a) => a.body, () => ({ members: [] }));
    return { certPem: leafOf(issued.certPem), keyPem, serial: issued.serial, members: view.members };
  } catch (err) {
    if (!(err instanceof UnreachableError)) throw err;
    throw new CliFailure(
      `the node's API at ${addr} did not answer: ${err.reason}. login --local has the node sign and record the credential, so the node must run; nothing was written`,
      exitCodes.unavailable, 'unreachable',
      { hint: `start it (its systemd unit, or shoal serve --config ${configFile}) and run this again` },
    );
  }
}

/** `shoal login --local`: see the top of this file. */
export async function loginLocal(opts: { data: string; name?: string }): Promise<LocalLogin> {
  const { dir, identity, configFile } = checkDataDir(opts.data);
  const principal = opts.name ?? localPrincipal();
  if (!isValidPrincipal(principal)) throw new UsageError(`--name '${principal}': a principal is ${principalRule}`);
  const config = loadConfig(configFile);
  const addr = localApiAddress(config.api.listen);
  if (config.api.insecureLoopback) {
    throw new CliFailure(`node ${identity.name} serves its API as plain HTTP on loopback (api.insecureLoopback in ${configFile}): it takes no credential; call it with --addr ${addr}`, exitCodes.failed, 'failed');
  }
  const caPem = readFileSync(path.join(dir, 'tls', 'ca.crt'), 'utf8');
  const caKey = readCaKey(dir, identity);
  const { issueClientCert } = await import('../security/client-certs.ts');
  // Held in memory only, and valid for a day: it serves to ask the node for the real certificate.
  const bootstrapCert = await issueClientCert({ certPem: caPem, keyPem: caKey }, { principal, role: 'admin', validDays: 1 });
  const base = { version: 1 as const, clusterId: identity.clusterId, ca: caPem, principal, role: 'admin' as const };
  const issued = await issueThroughNode(addr, { ...base, addresses: [addr], cert: bootstrapCert.certPem, key: bootstrapCert.keyPem }, principal, configFile);
  // This node first, on the address this machine reaches it at; then the other members, as the cluster knows them.
  const others = issued.members.filter((m) => m.id !== identity.id && localApiAddress(m.apiAddress) === m.apiAddress).map((m) => m.apiAddress);
  const addresses = [addr, ...others].slice(0, 64);
  const added = saveUserContext({ ...base, addresses, cert: issued.certPem, key: issued.keyPem }, contextNameFrom(identity.name));
  return { clusterId: identity.clusterId, node: { id: identity.id, name: identity.name }, principal, serial: issued.serial, context: added.name, credential: added.file, addresses };
}
