// A node's identity on disk: its stable random id, its cluster's id, and its certificates.
//
//   <data>/node.json        {id, name, clusterId}
//   <data>/tls/ca.crt       the cluster CA certificate (every node)
//   <data>/tls/ca.key       the CA key (only on the node that created the cluster, or copied)
//   <data>/tls/node.crt     this node's certificate, signed by the CA, its id in CN and SAN
//   <data>/tls/node.key

import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import type { PemPair } from '../security/index.ts';

/**
 * The rule for a new node's name: 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit,
 * so that it is typed, printed and used in file and host names without quoting. Checked when a
 * name is given (init, dev, snapshot restore, cluster add); an identity written before the rule
 * still loads, whatever its name.
 */
export const nodeNamePattern = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const nodeNameRule = "1 to 63 of a-z, 0-9 and '-', starting with a letter or digit";
export const nodeNameSchema = z.string().regex(nodeNamePattern, `a node name is ${nodeNameRule}`);

const identitySchema = z.object({ id: z.string().min(1), name: z.string().min(1), clusterId: z.string().min(1) }).strict();
export type Identity = z.infer<typeof identitySchema>;

import type { Tls } from '../base/tls-material.ts';

export type { Tls };

export const newId = (): string => randomBytes(8).toString('hex');

const files = (dir: string) => ({
  identity: path.join(dir, 'node.json'),
  caCert: path.join(dir, 'tls', 'ca.crt'),
  caKey: path.join(dir, 'tls', 'ca.key'),
  cert: path.join(dir, 'tls', 'node.crt'),
  key: path.join(dir, 'tls', 'node.key'),
});

export function isInitialized(dir: string): boolean {
  return existsSync(files(dir).identity);
}

export interface InitOptions {
  dataDir: string;
  name: string;
  /** Data directory of a node holding the cluster CA key, to join its cluster; omitted: a new cluster and CA. */
  caFrom?: string;
  /** Hosts the node's certificate is valid for (IPs or names). */
  hosts?: string[];
}

export async function initNode(opts: InitOptions): Promise<Identity> {
  if (!nodeNamePattern.test(opts.name)) throw new ShoalError('config_invalid', `invalid node name '${opts.name}': a node name is ${nodeNameRule}`);
  const f = files(opts.dataDir);
  if (existsSync(f.identity)) {
    throw new ShoalError('config_invalid', `${opts.dataDir} is already initialized (node ${loadIdentity(opts.dataDir).id}); use it with 'shoal serve' or choose another --data`);
  }
  // Loaded here, not at the top: the X.509 library takes a tenth of a second or more to load,
  // and every start of a node would pay it, though only init issues certificates.
  const { createCa, issueNodeCert } = await import('../security/certificates.ts');
  let ca: PemPair;
  let clusterId: string;
  if (opts.caFrom !== undefined) {
    const src = files(opts.caFrom);
    if (!existsSync(src.caKey)) throw new ShoalError('config_invalid', `${opts.caFrom} holds no CA key (${src.caKey}); point --ca-from at the node that created the cluster`);
    ca = { certPem: readFileSync(src.caCert, 'utf8'), keyPem: readFileSync(src.caKey, 'utf8') };
    clusterId = loadIdentity(opts.caFrom).clusterId;
  } else {
    clusterId = newId();
    ca = await createCa(clusterId);
  }
  const id = newId();
  const hosts = [...new Set(['127.0.0.1', 'localhost', '::1', ...(opts.hosts ?? [])])];
  const cert = await issueNodeCert(ca, id, { hosts });
  mkdirSync(path.dirname(f.cert), { recursive: true, mode: 0o700 });
  writeFileSync(f.caCert, ca.certPem);
  if (opts.caFrom === undefined) writeFileSync(f.caKey, ca.keyPem, { mode: 0o600 });
  writeFileSync(f.cert, cert.certPem);
  writeFileSync(f.key, cert.keyPem, { mode: 0o600 });
  const identity: Identity = { id, name: opts.name, clusterId };
  // Written last: its presence means the directory is complete.
  writeFileSync(f.identity, `${JSON.stringify(identity, null, 2)}\n`);
  return identity;
}

/**
 * Writes the data directory of a node that joined with a token (src/cli/join.ts): its identity,
 * the CA certificate (never its key), and the certificate the leader signed for the key this
 * machine made. The identity file goes last: its presence means the directory is complete.
 */
export function writeJoinedNode(dir: string, identity: Identity, tls: Tls): void {
  const f = files(dir);
  if (existsSync(f.identity)) {
    throw new ShoalError('config_invalid', `${dir} is already initialized (node ${loadIdentity(dir).id}); choose another --data`);
  }
  mkdirSync(path.dirname(f.cert), { recursive: true, mode: 0o700 });
  writeFileSync(f.caCert, tls.caPem);
  writeFileSync(f.cert, tls.certPem);
  writeFileSync(f.key, tls.keyPem, { mode: 0o600 });
  writeFileSync(f.identity, `${JSON.stringify(identity, null, 2)}\n`);
}

/**
 * Gives an existing node a new cluster id (`shoal recover --force-new-cluster`): the same node,
 * certificates and CA, in a new cluster. Written to a temporary name and renamed, so node.json
 * is the old identity or the new one, never a part.
 */
export function replaceClusterId(dir: string, clusterId: string): Identity {
  const identity = { ...loadIdentity(dir), clusterId };
  const f = files(dir).identity;
  const fd = openSync(`${f}.tmp`, 'w');
  try {
    writeFileSync(fd, `${JSON.stringify(identity, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(`${f}.tmp`, f);
  return identity;
}

export function loadIdentity(dir: string): Identity {
  const f = files(dir).identity;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(f, 'utf8'));
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read ${f}: ${(err as Error).message}; run 'shoal init --data ${dir}' first`);
  }
  const parsed = identitySchema.safeParse(raw);
  if (!parsed.success) throw new ShoalError('storage_corrupt', `${f} is damaged: ${parsed.error.message}`);
  return parsed.data;
}

export function loadTls(dir: string): Tls {
  const f = files(dir);
  try {
    return { caPem: readFileSync(f.caCert, 'utf8'), certPem: readFileSync(f.cert, 'utf8'), keyPem: readFileSync(f.key, 'utf8') };
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read the node's certificates in ${path.dirname(f.cert)}: ${(err as Error).message}`);
  }
}
