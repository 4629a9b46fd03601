// The console in a real browser (Debian's chromium, driven by puppeteer-core; nothing downloads
// a browser) against a real three-process cluster whose agents run containers on Docker: it shows
// the leader, follows a leader kill, shows a service's tasks appear (and one on a killed node as
// on an unreachable node until the node is back), and drains a node from the
// Nodes view, behind the confirmation, after which the node's tasks run elsewhere. Each page is
// saved as a screenshot in test-results/console/ (the ones in docs/console/ come from this test).
// Run it under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/console/console-browser.test.ts

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceDoc, withDockerSystem, type DockerSystem } from '../system/docker-system.ts';
import { builtConsole } from './console-build.ts';

const chromium = process.env.CHROMIUM ?? '/usr/bin/chromium';
const shots = path.resolve('test-results/console');

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

/** Waits until `selector`'s text satisfies `ok`; returns the text. */
async function textWhen(page: Page, selector: string, ok: (text: string) => boolean, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    last = await page.$eval(selector, (el) => el.textContent ?? '').catch(() => '');
    if (ok(last)) return last;
    if (Date.now() > deadline) throw new Error(`${selector} still reads ${JSON.stringify(last)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the web console in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    process.env.SHOAL_CONSOLE_DIR = await builtConsole();
    browser = await puppeteer.launch({ executablePath: chromium, headless: true, timeout: 110_000, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    delete process.env.SHOAL_CONSOLE_DIR;
  });

  it('shows the leader and follows a kill, a service\'s tasks, and drains a node from the UI', async () => {
    await withDockerSystem({ control: { suspectAfterMs: 3000, downAfterMs: 6000, restartGraceMs: 6000 } }, async (sys: DockerSystem) => {
      const leader = await sys.leader();
      const viewer = sys.cluster.nodes.find((n) => n !== leader);
      if (viewer === undefined) throw new Error('no follower');
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(String(e)));
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(`http://${viewer.apiAddress}/ui/#cluster`);
      await textWhen(page, '[data-testid=leader]', (t) => t === leader.name);
      expect(await page.$$eval('tr[data-member]', (rows) => rows.length)).toBe(3);
      await shot(page, 'cluster');

      // The leader dies: the page, served by a follower, shows the new leader without a reload.
      await sys.cluster.kill(leader);
      const next = await textWhen(page, '[data-testid=leader]', (t) => t !== '' && t !== leader.name && t !== 'none');
      expect(sys.cluster.nodes.map((n) => n.name)).toContain(next);
      await textWhen(page, `tr[data-member=${leader.name}]`, (t) => t.includes('unreachable'));
      sys.cluster.start(leader);
      await textWhen(page, `tr[data-member=${leader.name}]`, (t) => t.includes('healthy'));

      // A service's tasks appear.
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await page.goto(`http://${viewer.apiAddress}/ui/#services`);
      await page.waitForSelector('tr[data-service=web] button');
      await page.click('tr[data-service=web] button');
      await sys.waitConverged('web');
      await page.waitForFunction(() => document.querySelectorAll('tr[data-task-state=running]').length === 3, { timeout: 30_000 });
      await shot(page, 'services');

      // A node that runs one of its tasks dies: until it is back (before it is declared down), the
      // task counts as on an unreachable node, not as running.
      const current = await sys.leader();
      const victim = sys.cluster.nodes.find((n) => n !== viewer && n !== current);
      if (victim === undefined) throw new Error('no node to kill');
      await sys.cluster.kill(victim);
      await textWhen(page, 'tr[data-service=web] [data-replicas]', (t) => t === '2 / 3 · 1 on an unreachable node', 20_000);
      sys.cluster.start(victim);
      await textWhen(page, 'tr[data-service=web] [data-replicas]', (t) => t === '3 / 3', 60_000);

      // Drain the node that runs a task, from the Nodes view, behind the confirmation.
      const { tasks } = await sys.service('web');
      const target = tasks.find((t) => t.observed === 'running')?.nodeName;
      if (target == null) throw new Error('no running task');
      await page.goto(`http://${viewer.apiAddress}/ui/#nodes`);
      await page.waitForSelector(`tr[data-node=${target}] button[data-action=drain]`);
      await page.click(`tr[data-node=${target}] button[data-action=drain]`);
      await page.waitForSelector('dialog[open] button[data-confirm]');
      await shot(page, 'drain-confirm');
      // Cancel first: nothing changes.
      await page.keyboard.press('Escape');
      expect((await sys.nodeView(target)).record.availability).toBe('active');
      await page.click(`tr[data-node=${target}] button[data-action=drain]`);
      await page.waitForSelector('dialog[open] button[data-confirm]');
      await page.click('dialog[open] button[data-confirm]');
      await textWhen(page, `tr[data-node=${target}] [data-availability]`, (t) => t === 'drain');
      await textWhen(page, `tr[data-node=${target}] [data-tasks]`, (t) => t === '0 (0)', 60_000);
      const after = await sys.waitConverged('web');
      expect(after.tasks.filter((t) => t.observed === 'running' && t.nodeName === target)).toEqual([]);
      expect(after.tasks.filter((t) => t.observed === 'running')).toHaveLength(3);
      await shot(page, 'nodes');

      await page.goto(`http://${viewer.apiAddress}/ui/#events`);
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=events] li').length > 0, { timeout: 30_000 });
      await shot(page, 'events');
      await page.goto(`http://${viewer.apiAddress}/ui/#documents`);
      await page.waitForSelector('nav[aria-label=Collections] button');
      await shot(page, 'documents');
      // A phone-sized screen in the dark.
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
      await page.setViewport({ width: 390, height: 844 });
      await page.goto(`http://${viewer.apiAddress}/ui/#cluster`);
      await textWhen(page, '[data-testid=leader]', (t) => t !== '');
      await shot(page, 'cluster-phone-dark');
      expect(problems).toEqual([]);
    });
  }, 300_000);
});
