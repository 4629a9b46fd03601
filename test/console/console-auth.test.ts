// The console behind the API's authentication, in chromium: a page served over TLS asks for a
// credential, a reader sees the cluster but is refused (403, shown, nothing changed) when it
// moves leadership, and an admin token moves it. The browser trusts only the nodes' own keys
// (--ignore-certificate-errors-spki-list with their SPKI hashes): what importing the cluster CA
// gives an operator's browser (docs/console.md).

import { mkdirSync } from 'node:fs';
import { createHash } from 'node:crypto';
import tls from 'node:tls';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningNode } from '../../src/server/server.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from '../security/tls-node.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { builtConsole } from './console-build.ts';

const chromium = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** base64(sha256(SubjectPublicKeyInfo)) of the certificate a node serves: Chromium's pin format. */
function spkiOf(node: RunningNode, ca: string): Promise<string> {
  const [host, port] = node.apiAddress.split(':');
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host, port: Number(port), ca, checkServerIdentity: () => undefined }, () => {
      const cert = s.getPeerX509Certificate();
      s.end();
      if (cert === undefined) return reject(new Error('no certificate'));
      resolve(createHash('sha256').update(cert.publicKey.export({ type: 'spki', format: 'der' })).digest('base64'));
    });
    s.on('error', reject);
  });
}

async function textOf(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (el) => el.textContent ?? '').catch(() => '');
}

async function signIn(page: Page, token: string): Promise<void> {
  await page.waitForSelector('#login-h');
  await page.type('input[type=password]', token);
  await page.click('form button[type=submit]');
  await page.waitForFunction(() => (document.querySelector('[data-testid=leader]')?.textContent ?? '') !== '', { timeout: 20_000 });
}

describe('the console with authentication', () => {
  let c: TlsCluster;
  let browser: Browser;
  let admin: ClientCredential;
  beforeAll(async () => {
    process.env.SHOAL_CONSOLE_DIR = await builtConsole();
    c = await tlsCluster(2);
    admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'console-test', role: 'admin' }) };
    const pins = await Promise.all(c.nodes.map((n) => spkiOf(n, c.ca.certPem)));
    browser = await puppeteer.launch({
      executablePath: chromium, headless: true, timeout: 110_000,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', `--ignore-certificate-errors-spki-list=${pins.join(',')}`],
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await c?.close();
    delete process.env.SHOAL_CONSOLE_DIR;
  });

  const ids = new Map<string, string>();
  const token = async (role: 'admin' | 'reader', principal: string): Promise<string> => {
    const r = await call(c.nodes[0] as RunningNode, admin, 'POST', '/v1/credentials', { principal, role });
    expect(r.status).toBe(201);
    ids.set(principal, r.body.id as string);
    return r.body.token as string;
  };
  const leaderName = async (): Promise<string> => {
    const r = await call(c.nodes[0] as RunningNode, admin, 'GET', '/v1/cluster');
    const v = r.body as { leader: string; members: { id: string; name: string }[] };
    return v.members.find((m) => m.id === v.leader)?.name ?? '';
  };

  it('asks for a credential, refuses a reader\'s leadership move, and lets an admin make it', async () => {
    const page = await browser.newPage();
    const node = c.nodes[0] as RunningNode;
    await page.goto(`https://${node.apiAddress}/ui/#cluster`);
    await page.waitForSelector('#login-h');
    // It says how to get a token, in the CLI's own syntax (src/cli/credential.ts).
    expect(await textOf(page, '[data-testid=login-how]')).toContain('npx shoal credential create --principal me --role operator');
    // The folder is made here too: this file may run before console-browser.test.ts, which makes it.
    mkdirSync('test-results/console', { recursive: true });
    await page.screenshot({ path: 'test-results/console/login.png' });

    await signIn(page, await token('reader', 'console-reader'));
    const before = await leaderName();
    expect(await textOf(page, '[data-testid=leader]')).toBe(before);
    const follower = before === 'n1' ? 'n2' : 'n1';
    await page.click(`tr[data-member=${follower}] button`);
    await page.waitForSelector('dialog[open] button[data-confirm]');
    await page.click('dialog[open] button[data-confirm]');
    await page.waitForSelector('.notice');
    expect(await textOf(page, '.notice')).toContain('forbidden');
    expect(await leaderName()).toBe(before);

    await page.click('header button.link');
    await signIn(page, await token('admin', 'console-admin'));
    await page.click(`tr[data-member=${follower}] button`);
    await page.waitForSelector('dialog[open] button[data-confirm]');
    await page.click('dialog[open] button[data-confirm]');
    await page.waitForFunction((name: string) => document.querySelector('[data-testid=leader]')?.textContent === name, { timeout: 20_000 }, follower);
    expect(await leaderName()).toBe(follower);

    // A drill report kept in the store shows under the events.
    const report = {
      id: 'drill-20261201t230000-abc', drill: 'leader-kill', startedAt: new Date().toISOString(), target: { id: 'x', name: before },
      faultSeconds: null, leaderBefore: before, leaderAfter: follower, newLeaderMs: 362, longestWriteGapMs: 231,
      writes: { attempted: 100, acknowledged: 99, failed: 1, lost: 0 }, reads: { done: 50, failed: 0, backwards: 0 },
      workloads: { runningBefore: 0, runningAfter: 0, restarted: 0, duplicated: 0 }, servicesBackMs: 0, recovered: true, recoveryMs: 3645, problems: [], ok: true,
    };
    const kept = await call(c.nodes[0] as RunningNode, admin, 'POST', '/v1/drills', report);
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    await page.goto(`https://${node.apiAddress}/ui/#events`);
    await page.waitForFunction(() => (document.querySelector('[data-testid=drills]')?.textContent ?? '').includes('leader-kill'), { timeout: 20_000 });
    expect(await textOf(page, '[data-testid=drills]')).toContain('362 ms');

    // The admin's token is revoked: the next poll is refused, and the sign-in says why.
    const revoked = await call(c.nodes[0] as RunningNode, admin, 'DELETE', `/v1/credentials/${ids.get('console-admin') ?? ''}`);
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    await page.waitForSelector('[data-testid=login-reason]', { timeout: 20_000 });
    expect(await textOf(page, '[data-testid=login-reason]')).toMatch(/unknown or revoked/);
  }, 120_000);
});
