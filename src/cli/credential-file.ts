// The credential file: how the CLI knows which cluster it talks to and who it is there. It holds
// the cluster CA (pinned: the only trust root the CLI accepts a node's certificate from), the
// nodes' API addresses, and either a client certificate and key or a bearer token. Found, in
// this order: --credential FILE, $SHOAL_CONFIG/credential.json (a directory), then
// ~/.config/shoal/credential.json. With $SHOAL_CONFIG set, the home file is never read.
// Without any, the CLI speaks plain HTTP: the only API that answers it is an insecure-loopback one.

import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, setGlobalDispatcher } from 'undici';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { hostPortSchema } from '../base/host-port.ts';
import { clientRoles } from '../security/roles.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';

export const credentialFileName = 'credential.json';

const pem = (label: string) => z.string().regex(new RegExp(`-----BEGIN ${label}-----`), `a PEM ${label}`);

export const credentialFileSchema = z.object({
  version: z.literal(1),
  clusterId: z.string().min(1),
  /** The cluster CA certificate: the only trust root. */
  ca: pem('CERTIFICATE'),
  /** The nodes' client API addresses; the first is the default --addr. */
  addresses: z.array(hostPortSchema).min(1).max(64),
  principal: z.string().min(1),
  role: z.enum(clientRoles),
  cert: pem('CERTIFICATE').optional(),
  key: pem('PRIVATE KEY').optional(),
  token: z.string().regex(/^shoal_[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/, 'a bearer token shoal_<id>.<secret>').optional(),
}).strict().superRefine((c, ctx) => {
  const withCert = c.cert !== undefined && c.key !== undefined;
  const withToken = c.token !== undefined;
  if (withCert === withToken || (c.cert === undefined) !== (c.key === undefined)) {
    ctx.addIssue({ code: 'custom', path: [], message: 'a credential holds either cert and key, or token' });
  }
});
export type CredentialFile = z.infer<typeof credentialFileSchema>;

export interface FoundCredential {
  file: string;
  /** Which rule found it: what `--help` and error messages name. */
  source: '--credential' | '$SHOAL_CONFIG' | '~/.config/shoal';
}

/** ~/.config/shoal, or $XDG_CONFIG_HOME/shoal. */
export function homeConfigDir(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'shoal');
}

/** Where the local user's credential is written by `shoal dev` and `shoal init`: $SHOAL_CONFIG, else ~/.config/shoal. */
export function userCredentialFile(): string {
  const dir = process.env.SHOAL_CONFIG || homeConfigDir();
  return path.join(dir, credentialFileName);
}

/** The credential file the rules find, or undefined when there is none. */
export function findCredential(flag: string | undefined): FoundCredential | undefined {
  if (flag !== undefined) return { file: path.resolve(flag), source: '--credential' };
  const dir = process.env.SHOAL_CONFIG;
  if (dir !== undefined && dir !== '') {
    const file = path.join(dir, credentialFileName);
    return existsSync(file) ? { file, source: '$SHOAL_CONFIG' } : undefined;
  }
  const file = path.join(homeConfigDir(), credentialFileName);
  return existsSync(file) ? { file, source: '~/.config/shoal' } : undefined;
}

export function readCredential(found: FoundCredential): CredentialFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(found.file, 'utf8'));
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read the credential ${found.file} (${found.source}): ${(err as Error).message}`, { file: found.file });
  }
  const parsed = credentialFileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(top level)'}: ${i.message}`).join('\n');
    throw new ShoalError('config_invalid', `the credential ${found.file} (${found.source}) is invalid:\n${problems}`, { file: found.file });
  }
  return parsed.data;
}

/** Writes a credential readable by its owner only, replacing any file there at once (never half-written). */
/**
 * The credential already in `file` when it is another cluster's and names an address beyond
 * loopback (a real cluster's; a `shoal dev` cluster's also stays in its data directory): moved
 * aside to `credential.<its cluster id>.json` rather than lost. Returns where, or undefined.
 */
function keepOtherCluster(file: string, clusterId: string): string | undefined {
  if (!existsSync(file)) return undefined;
  let old: CredentialFile;
  try {
    old = credentialFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    return undefined;
  }
  const loopback = (a: string): boolean => /^(127\.|localhost:|\[::1\]:)/.test(a);
  if (old.clusterId === clusterId || old.addresses.every(loopback)) return undefined;
  const base = file.endsWith('.json') ? file.slice(0, -'.json'.length) : file;
  let kept = `${base}.${old.clusterId}.json`;
  if (existsSync(kept)) kept = `${base}.${old.clusterId}.${Date.now()}.json`;
  renameSync(file, kept);
  return kept;
}

/**
 * Writes the credential (0600, whole or not at all). Another cluster's credential in its place
 * is kept beside it (keepOtherCluster), and standard error says where.
 */
export function writeCredential(file: string, credential: CredentialFile): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const kept = keepOtherCluster(file, credential.clusterId);
  if (kept !== undefined) process.stderr.write(`${file} held the credential of another cluster; kept it as ${kept} (use it with --credential ${kept})\n`);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(credentialFileSchema.parse(credential), null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

// ---- the credential this process uses ----------------------------------------------------

interface Active {
  credential: CredentialFile | null;
}
let flagValue: string | undefined;
let active: Active | undefined;

/** The value of --credential for this run (main.ts takes it off the command line), and a fresh look-up. */
export function useCredentialFlag(flag: string | undefined): void {
  flagValue = flag;
  active = undefined;
}

/** The file the credential of this run comes from, if any (`shoal ca rotate` rewrites it). */
export function activeCredentialFile(): string | undefined {
  return findCredential(flagValue)?.file;
}

/** Forgets the credential read: the next request reads the file again (it was just rewritten). */
export function reloadActiveCredential(): void {
  active = undefined;
}

/**
 * The credential this run uses, found and read once; it also points every fetch() of this
 * process at the pinned CA with the client certificate, if the credential has one.
 */
export function activeCredential(): CredentialFile | null {
  if (active !== undefined) return active.credential;
  const found = findCredential(flagValue);
  const credential = found === undefined ? null : readCredential(found);
  active = { credential };
  setGlobalDispatcher(new Agent(credential === null ? {} : {
    connect: {
      ca: credential.ca, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity,
      ...(credential.cert !== undefined && credential.key !== undefined ? { cert: credential.cert, key: credential.key } : {}),
    },
  }));
  return credential;
}
