// Which credential the CLI uses, and where the local user's credentials are kept. In this
// order: --credential FILE; --context NAME; $SHOAL_CONTEXT; the current context of the config
// directory ($SHOAL_CONFIG, else ~/.config/shoal; with $SHOAL_CONFIG set the home directory is
// never read), where the credential.json of releases before contexts counts as the context
// `default` (contexts.ts). Without any, the CLI speaks plain HTTP: the only API that answers it
// is an insecure-loopback one. The file format is credential-format.ts.

import path from 'node:path';
import type { Agent } from 'undici';
import { loadUndici } from '../base/load-undici.ts';
import { ShoalError } from '../errors.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';
import { closest, UsageError } from './args.ts';
import { addContext, configDir, contextNamed, currentContext, listContexts, type AddedContext, type ConfigSource } from './contexts.ts';
import { credentialFileName, readCredentialFile, type CredentialFile } from './credential-format.ts';

export { credentialFileName, credentialFileSchema, writeCredential, type CredentialFile } from './credential-format.ts';
export { homeConfigDir } from './contexts.ts';

export interface FoundCredential {
  file: string;
  /** Which rule found it: what `--help` and error messages name. A context found as current names its directory's rule. */
  source: '--credential' | '--context' | '$SHOAL_CONTEXT' | ConfigSource;
  /** The context's name, unless the file came from --credential. */
  context?: string;
}

/** How the CLI came to the file, for messages: "--credential", "context home, the current one". */
export function foundLabel(found: FoundCredential): string {
  if (found.context === undefined) return found.source;
  const how = found.source === '--context' || found.source === '$SHOAL_CONTEXT' ? found.source : `the current one in ${found.source}`;
  return `context ${found.context}, ${how}`;
}

/** The file of the current context (where `shoal dev` and `shoal init` just added theirs), else the legacy credential.json's place. */
export function userCredentialFile(): string {
  const { dir } = configDir();
  return currentContext(dir)?.file ?? path.join(dir, credentialFileName);
}

function missingContext(name: string, how: '--context' | '$SHOAL_CONTEXT', dir: string): Error {
  const known = listContexts(dir).map((c) => c.name);
  const guess = closest(name, known);
  const message = `${how} names no context '${name}' in ${dir}${guess !== undefined ? ` (did you mean ${guess}?)` : ''}; ${known.length > 0 ? `the contexts are ${known.join(', ')} (shoal context ls)` : "there are none: 'shoal login', 'shoal init' and 'shoal dev' add one"}`;
  return how === '--context' ? new UsageError(message) : new ShoalError('config_invalid', message, { context: name });
}

/** The credential file the rules find, or undefined when there is none. */
export function findCredential(flag: string | undefined, contextFlag?: string): FoundCredential | undefined {
  if (flag !== undefined) return { file: path.resolve(flag), source: '--credential' };
  const { dir, source } = configDir();
  const how = contextFlag !== undefined ? '--context' : process.env.SHOAL_CONTEXT ? '$SHOAL_CONTEXT' : undefined;
  if (how !== undefined) {
    const name = contextFlag ?? process.env.SHOAL_CONTEXT ?? '';
    const entry = contextNamed(dir, name);
    if (entry === undefined) throw missingContext(name, how, dir);
    return { file: entry.file, source: how, context: entry.name };
  }
  const current = currentContext(dir);
  return current === undefined ? undefined : { file: current.file, source, context: current.name };
}

export function readCredential(found: FoundCredential): CredentialFile {
  return readCredentialFile(found.file, foundLabel(found));
}

// ---- the credential this process uses ----------------------------------------------------

interface Active {
  found: FoundCredential | undefined;
  credential: CredentialFile | null;
}
let flagValue: string | undefined;
let contextFlagValue: string | undefined;
let active: Active | undefined;

/** The value of --credential for this run (main.ts takes it off the command line), and a fresh look-up. */
export function useCredentialFlag(flag: string | undefined): void {
  flagValue = flag;
  active = undefined;
}

/** --credential and --context for this run (main.ts takes both off the command line). */
export function useCredentialFlags(flags: { credential?: string; context?: string }): void {
  flagValue = flags.credential;
  contextFlagValue = flags.context;
  active = undefined;
}

/** The name --context gave: the context this run uses, or the one `init`, `dev` and `login` add. */
export function contextFlag(): string | undefined {
  return contextFlagValue;
}

/** The file the credential of this run comes from, if any (`shoal ca rotate` rewrites it). */
export function activeCredentialFile(): string | undefined {
  return activeCredentialFound()?.file;
}

/** Where the credential of this run comes from, if any: what error messages name. */
export function activeCredentialFound(): FoundCredential | undefined {
  activeCredential();
  return active?.found;
}

/** Forgets the credential read: the next request reads the file again (it was just rewritten). */
export function reloadActiveCredential(): void {
  active = undefined;
}

/**
 * The credential this run uses, found and read once; it also points every fetch() of this
 * process at the pinned CA with the client certificate, if the credential has one, from when
 * credentialDispatcherReady() resolves.
 */
export function activeCredential(): CredentialFile | null {
  if (active !== undefined) return active.credential;
  const found = findCredential(flagValue, contextFlagValue);
  return activate(found, found === undefined ? null : readCredential(found));
}

/** Makes `credential`, held in memory only, the one this run uses (`shoal login --local` before it writes one). */
export function useCredentialInMemory(credential: CredentialFile): void {
  activate(undefined, credential);
}

/**
 * The global dispatcher of the active credential, being installed: undici (750 KiB of code) is
 * loaded with the first credential activated, not when the process starts, so a command that
 * sends no request (and `shoal serve`, whose command line passes through here) never loads it
 * (issue 45). client.ts awaits it before each request.
 */
let dispatcherInstalled: Promise<void> = Promise.resolve();

function activate(found: FoundCredential | undefined, credential: CredentialFile | null): CredentialFile | null {
  active = { found, credential };
  const options: ConstructorParameters<typeof Agent>[0] = credential === null ? {} : {
    connect: {
      ca: credential.ca, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity,
      ...(credential.cert !== undefined && credential.key !== undefined ? { cert: credential.cert, key: credential.key } : {}),
    },
  };
  // Two activations in a row install in order: both wait for the same module.
  dispatcherInstalled = loadUndici().then(({ Agent: AgentClass, setGlobalDispatcher }) => setGlobalDispatcher(new AgentClass(options)));
  dispatcherInstalled.catch(() => {}); // reported to whoever awaits it
  return credential;
}

/**
 * Resolves once every fetch() of this process goes to the pinned CA with the client certificate
 * of the credential activated last (activeCredential() starts that); rejects if it could not.
 */
export function credentialDispatcherReady(): Promise<void> {
  return dispatcherInstalled;
}

/**
 * Adds `credential` as a context of the local user and makes it current: named by --context if
 * given, else `name`. Says on standard error when the name was another cluster's (a suffix was
 * added) or when the credential.json of before contexts was moved to a context.
 */
export function saveUserContext(credential: CredentialFile, name: string): AddedContext {
  const { dir } = configDir();
  const added = addContext(dir, credential, contextFlagValue ?? name);
  if (added.migrated !== undefined) process.stderr.write(`moved the credential of before contexts to the context '${added.migrated.name}' (${added.migrated.file})\n`);
  if (added.taken !== undefined) process.stderr.write(`the context '${added.taken}' is another cluster's; kept it, and added this one as '${added.name}'\n`);
  active = undefined;
  return added;
}
