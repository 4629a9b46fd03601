// Contexts: the local user's credentials, one per cluster, by name (src/cli/contexts.ts). Adding
// one never replaces another cluster's; --credential, then --context, then $SHOAL_CONTEXT, then
// the current one pick the credential; a credential.json of before contexts keeps working as the
// context `default`. Also: a hand-written credential file is refused field by field. No node.

import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.ts';
import { addContext, contextNameFrom, currentContext, listContexts, removeContext, useContext } from '../../src/cli/contexts.ts';
import { takeCredentialFlags } from '../../src/cli/credential-flag.ts';
import { findCredential, readCredential, saveUserContext, useCredentialFlags, writeCredential, type CredentialFile } from '../../src/cli/credential-file.ts';
import { ShoalError } from '../../src/errors.ts';
import { inProcess } from '../cli/in-process.ts';

const pem = (label: string) => `-----BEGIN ${label}-----\nAAAA\n-----END ${label}-----\n`;
const token = `shoal_0123456789abcdef.${'a'.repeat(43)}`;
const cred = (clusterId: string, more: Partial<CredentialFile> = {}): CredentialFile => ({
  version: 1, clusterId, ca: pem('CERTIFICATE'), addresses: ['10.0.0.1:7100'], principal: 'alice', role: 'admin', token, ...more,
});

const saved = { SHOAL_CONFIG: process.env.SHOAL_CONFIG, SHOAL_CONTEXT: process.env.SHOAL_CONTEXT };
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-contexts-'));
  process.env.SHOAL_CONFIG = dir;
  delete process.env.SHOAL_CONTEXT;
  useCredentialFlags({});
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  useCredentialFlags({});
});

const clusterOf = (file: string): string => (JSON.parse(readFileSync(file, 'utf8')) as CredentialFile).clusterId;

describe('adding contexts', () => {
  it('adds by name and makes the new one current; another cluster\'s name gets a suffix; the same cluster\'s is replaced', () => {
    const home = addContext(dir, cred('c-home'), 'home');
    expect(home).toMatchObject({ name: 'home', replaced: false, file: path.join(dir, 'contexts', 'home.json') });
    expect(addContext(dir, cred('c-lab'), 'lab').name).toBe('lab');
    expect(currentContext(dir)?.name).toBe('lab');
    // Another cluster under a taken name: kept, and this one is lab-2.
    const other = addContext(dir, cred('c-other'), 'lab');
    expect(other).toMatchObject({ name: 'lab-2', taken: 'lab', replaced: false });
    expect(clusterOf(path.join(dir, 'contexts', 'lab.json'))).toBe('c-lab');
    expect(currentContext(dir)?.name).toBe('lab-2');
    // The same cluster again (a new login): replaced in place.
    const again = addContext(dir, cred('c-lab', { principal: 'bob' }), 'lab');
    expect(again).toMatchObject({ name: 'lab', replaced: true });
    expect(listContexts(dir).map((c) => c.name)).toEqual(['home', 'lab', 'lab-2']);
  });

  it('a shoal dev directory that now holds a new cluster replaces its own context, and only its own', () => {
    const first = addContext(dir, cred('dev-a', { addresses: ['127.0.0.1:7101'], devDataDir: '/work/.shoal-dev' }), 'dev');
    expect(first.name).toBe('dev');
    // rm -rf .shoal-dev && shoal dev: same directory, new cluster: the old one is gone for good.
    expect(addContext(dir, cred('dev-b', { addresses: ['127.0.0.1:7101'], devDataDir: '/work/.shoal-dev' }), 'dev')).toMatchObject({ name: 'dev', replaced: true });
    // Another directory's dev cluster is another cluster that still exists.
    expect(addContext(dir, cred('dev-c', { addresses: ['127.0.0.1:7101'], devDataDir: '/elsewhere/.shoal-dev' }), 'dev').name).toBe('dev-2');
    // A file that does not read is never taken for ours.
    writeFileSync(path.join(dir, 'contexts', 'odd.json'), 'not json');
    expect(addContext(dir, cred('c-x'), 'odd').name).toBe('odd-2');
    expect(readFileSync(path.join(dir, 'contexts', 'odd.json'), 'utf8')).toBe('not json');
  });

  it('moves a credential.json of before contexts to the context default, keeping it current until another is added', () => {
    writeCredential(path.join(dir, 'credential.json'), cred('c-old'));
    expect(listContexts(dir)).toEqual([{ name: 'default', file: path.join(dir, 'credential.json'), legacy: true }]);
    expect(findCredential(undefined)).toEqual({ file: path.join(dir, 'credential.json'), source: '$SHOAL_CONFIG', context: 'default' });
    const added = addContext(dir, cred('c-new'), 'new');
    expect(added.migrated).toEqual({ name: 'default', file: path.join(dir, 'contexts', 'default.json'), legacy: false });
    expect(existsSync(path.join(dir, 'credential.json'))).toBe(false);
    expect(clusterOf(path.join(dir, 'contexts', 'default.json'))).toBe('c-old');
    expect(listContexts(dir).map((c) => c.name)).toEqual(['default', 'new']);
    expect(currentContext(dir)?.name).toBe('new');
  });

  it('uses and removes contexts; removing the current one leaves none current', () => {
    addContext(dir, cred('c1'), 'one');
    addContext(dir, cred('c2'), 'two');
    useContext(dir, 'one');
    expect(currentContext(dir)?.name).toBe('one');
    expect(removeContext(dir, 'two')).toMatchObject({ wasCurrent: false });
    expect(removeContext(dir, 'one')).toMatchObject({ wasCurrent: true });
    expect(currentContext(dir)).toBeUndefined();
    expect(findCredential(undefined)).toBeUndefined();
    expect(() => useContext(dir, 'one')).toThrow(/no context 'one'/);
  });

  it('makes context names from host and node names', () => {
    expect(contextNameFrom('10.0.0.1')).toBe('10.0.0.1');
    expect(contextNameFrom('::1')).toBe('1');
    expect(contextNameFrom('node-1.lan')).toBe('node-1.lan');
    expect(contextNameFrom('***')).toBe('cluster');
  });

  it('names the context after --context when init, dev or login add one', () => {
    useCredentialFlags({ context: 'mine' });
    expect(saveUserContext(cred('c1'), 'n1').name).toBe('mine');
    expect(currentContext(dir)?.name).toBe('mine');
  });
});

describe('which credential a command uses', () => {
  beforeEach(() => {
    addContext(dir, cred('c-a'), 'a');
    addContext(dir, cred('c-b'), 'b');
    useContext(dir, 'a');
  });

  it('--credential, then --context, then $SHOAL_CONTEXT, then the current context', () => {
    expect(findCredential(undefined)).toMatchObject({ context: 'a', source: '$SHOAL_CONFIG' });
    process.env.SHOAL_CONTEXT = 'b';
    expect(findCredential(undefined)).toMatchObject({ context: 'b', source: '$SHOAL_CONTEXT' });
    expect(findCredential(undefined, 'a')).toMatchObject({ context: 'a', source: '--context' });
    expect(findCredential('x.json', 'a')).toEqual({ file: path.resolve('x.json'), source: '--credential' });
    useCredentialFlags({ context: 'b' });
    delete process.env.SHOAL_CONTEXT;
    expect(readCredential(findCredential(undefined, 'b') ?? { file: '', source: '--credential' }).clusterId).toBe('c-b');
  });

  it('a context that does not exist is a usage error with the nearest name (--context), or a config error ($SHOAL_CONTEXT)', () => {
    let err: unknown;
    try {
      findCredential(undefined, 'aa');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toBe(`--context names no context 'aa' in ${dir} (did you mean a?); the contexts are a, b (shoal context ls)`);
    process.env.SHOAL_CONTEXT = 'nope';
    expect(() => findCredential(undefined)).toThrow(ShoalError);
    expect(() => findCredential(undefined)).toThrow(/\$SHOAL_CONTEXT names no context 'nope'/);
  });

  it('takes --credential and --context off any command line, refusing both at once and a bad name', () => {
    const argv = ['status', '--context', 'lab', '--json'];
    expect(takeCredentialFlags(argv)).toEqual({ context: 'lab' });
    expect(argv).toEqual(['status', '--json']);
    expect(takeCredentialFlags(['doc', 'ls', 'x', '--context=lab'])).toEqual({ context: 'lab' });
    expect(() => takeCredentialFlags(['status', '--context', 'a', '--credential', 'f.json'])).toThrow(/not both/);
    expect(() => takeCredentialFlags(['status', '--context', 'a b'])).toThrow(/a context name is 1 to 63/);
    expect(() => takeCredentialFlags(['status', '--context'])).toThrow(/needs a value/);
  });
});

describe('shoal context', () => {
  beforeEach(() => {
    addContext(dir, cred('c-home'), 'home');
    addContext(dir, cred('c-lab', { addresses: ['10.1.0.1:7100', '10.1.0.2:7100'], token: undefined, cert: pem('CERTIFICATE'), key: pem('PRIVATE KEY') }), 'lab');
  });

  it('ls marks the one in use; use switches; show says which and why', async () => {
    const ls = await inProcess('context', 'ls');
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/^\s+NAME\s+CLUSTER\s+PRINCIPAL\s+ROLE\s+AUTH\s+ADDRESS\n\s+home\s+c-home\s+alice\s+admin\s+token\s+10\.0\.0\.1:7100\n\*\s+lab\s+c-lab\s+alice\s+admin\s+certificate\s+10\.1\.0\.1:7100 \(\+1\)\n$/);
    expect((await inProcess('context', 'use', 'home')).code).toBe(0);
    const json = JSON.parse((await inProcess('context', 'ls', '--json')).stdout) as { current: string; inUse: string; contexts: { name: string; current: boolean }[] };
    expect(json).toMatchObject({ current: 'home', inUse: 'home' });
    expect(json.contexts.map((c) => [c.name, c.current])).toEqual([['home', true], ['lab', false]]);
    // --context picks another for one command; show says so.
    const show = await inProcess('context', 'show', '--context', 'lab', '--json');
    expect(JSON.parse(show.stdout)).toMatchObject({ name: 'lab', why: '--context', clusterId: 'c-lab' });
  });

  it('rm refuses the current context without --force, and names the nearest for a typo', async () => {
    const refused = await inProcess('context', 'rm', 'lab');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("'lab' is the current context; give --force");
    const typo = await inProcess('context', 'use', 'hom');
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain("no context 'hom' (did you mean home?)");
    const forced = await inProcess('context', 'rm', 'lab', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('no context is current now');
    expect(listContexts(dir).map((c) => c.name)).toEqual(['home']);
    // A client command with a mistyped --context stops before sending anything.
    const status = await inProcess('status', '--context', 'hme');
    expect(status.code).toBe(2);
    expect(status.stderr).toContain("--context names no context 'hme'");
    expect(status.stderr).toContain('(did you mean home?)');
  });
});

describe('a hand-written credential file', () => {
  it('is refused with the file, every field that is wrong, and what the field must hold', () => {
    const file = path.join(dir, 'mine.json');
    writeFileSync(file, JSON.stringify({ version: 1, ca: 'MIIB...', addresses: '10.0.0.1:7100', principal: 'alice', role: 'root', token, user: 'x' }));
    let message = '';
    try {
      readCredential({ file, source: '--credential' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain(`the credential ${file} (--credential) is invalid:`);
    expect(message).toContain("clusterId: missing; expected the cluster's id, a string ('shoal status' prints it)");
    expect(message).toContain('ca: not PEM text with a -----BEGIN CERTIFICATE----- block; expected the cluster CA certificate as PEM text');
    expect(message).toContain('addresses: expected a list of 1 to 64 client API addresses as "HOST:PORT" strings');
    expect(message).toContain('got the string "10.0.0.1:7100"');
    expect(message).toContain('role: expected one of reader, operator, admin, got the string "root"');
    expect(message).toContain('unknown field user; a credential holds version, clusterId, ca, addresses, principal, role, and either cert and key or token');
    expect(message).not.toMatch(/received undefined|Invalid input/);
    writeFileSync(file, '[1]');
    expect(() => readCredential({ file, source: '--credential' })).toThrow(/\(top level\): expected a JSON object with version, clusterId/);
  });
});
