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
import { testImage } from '../executor/test-image.ts';
import { builtConsole } from './console-build.ts';

const chromium = process.env.CHROMIUM ?? '/usr/bin/chromium';
const shots = path.resolve('test-results/console');

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

/** The values a chart's line draws (charts.ts puts them on the path), null where missing. */
async function lineValues(page: Page, chart: string, line: string): Promise<Array<number | null>> {
  const raw = await page.$eval(`[data-chart=${chart}] path[data-line=${line}]`, (el) => el.getAttribute('data-values') ?? '').catch(() => '');
  return raw === '' ? [] : raw.split(',').map((v) => (v === '' ? null : Number(v)));
}

/** Waits until `check` holds, polling every 250 ms. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A burst of document writes through a node's API: `count` puts, `parallel` at a time. */
async function writeBurst(apiAddress: string, count: number, parallel: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const res = await fetch(`http://${apiAddress}/v1/docs/burst/d${i}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) });
      if (!res.ok) throw new Error(`write ${i}: ${res.status} ${await res.text()}`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
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
    // The nodes (child processes, which inherit it) sample their series every second instead of
    // every 10 s, so a burst the test makes shows in a chart within seconds.
    process.env.SHOAL_SERIES_INTERVAL_MS = '1000';
    browser = await puppeteer.launch({ executablePath: chromium, headless: true, timeout: 110_000, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    delete process.env.SHOAL_CONSOLE_DIR;
    delete process.env.SHOAL_SERIES_INTERVAL_MS;
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
      // The health summary on the header: a leader, a quorum that tolerates one failure, all ready.
      await textWhen(page, '[data-testid=summary]', (t) => t.includes(`Leader ${leader.name} · quorum, tolerates 1 failure`) && t.includes('Nodes ready'));

      // A write burst shows in the throughput chart: the writes line rises, then falls back.
      await page.select('#cluster-window', '300');
      await page.waitForSelector('[data-chart=throughput] path[data-line=writes]');
      await writeBurst(leader.apiAddress, 600, 8);
      let peak = 0;
      await until('the burst shows in the chart, then its end', async () => {
        const values = (await lineValues(page, 'throughput', 'writes')).filter((v): v is number => v !== null);
        peak = Math.max(0, ...values);
        const last = values.at(-1) ?? Number.POSITIVE_INFINITY;
        return peak >= 50 && last < peak / 4;
      }, 30_000);
      await shot(page, 'cluster');

      // The leader dies: the page, served by a follower, shows the new leader without a reload.
      const killedAt = Date.now();
      await sys.cluster.kill(leader);
      const next = await textWhen(page, '[data-testid=leader]', (t) => t !== '' && t !== leader.name && t !== 'none');
      expect(sys.cluster.nodes.map((n) => n.name)).toContain(next);
      await textWhen(page, `tr[data-member=${leader.name}]`, (t) => t.includes('unreachable'));
      // The new leader's election is a mark on its throughput chart (the charts follow the leader).
      await until('the leader change marked', async () => {
        const marks = await page.$$eval('[data-chart=throughput] line.mark', (ls) => ls.map((l) => Number(l.getAttribute('data-mark-at'))));
        return marks.some((at) => at >= killedAt);
      }, 30_000);
      sys.cluster.start(leader);
      await textWhen(page, `tr[data-member=${leader.name}]`, (t) => t.includes('healthy'));

      // A service's tasks appear.
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await page.goto(`http://${viewer.apiAddress}/ui/#services`);
      await page.waitForSelector('tr[data-service=web] button');
      await page.click('tr[data-service=web] button');
      await sys.waitConverged('web');
      await page.waitForFunction(() => document.querySelectorAll('tr[data-task-state=running]').length === 3, { timeout: 30_000 });

      // A node that runs one of its tasks dies: until it is back (before it is declared down), the
      // task counts as on an unreachable node, not as running.
      const current = await sys.leader();
      const victim = sys.cluster.nodes.find((n) => n !== viewer && n !== current);
      if (victim === undefined) throw new Error('no node to kill');
      await sys.cluster.kill(victim);
      await textWhen(page, 'tr[data-service=web] [data-replicas]', (t) => t === '2 / 3 · 1 on an unreachable node', 20_000);
      // The summary shows the node stopped within its detection time (suspect after 3 s; the
      // summary is asked every 2 s), with a link to it, and the task on it as failing once down.
      await textWhen(page, '[data-testid=summary]', (t) => t.includes(`Node ${victim.name} suspect`) || t.includes(`Node ${victim.name} down`), 3000 + 2000 + 5000);
      expect(await page.$eval(`[data-testid=summary] a[href="#nodes/${victim.name}"]`, (a) => a.textContent)).toMatch(/suspect|down/);
      await shot(page, 'summary-node-down');
      sys.cluster.start(victim);
      await textWhen(page, 'tr[data-service=web] [data-replicas]', (t) => t === '3 / 3', 60_000);
      await textWhen(page, '[data-testid=summary]', (t) => !t.includes(victim.name) && t.includes('Nodes ready'), 60_000);

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
      // Each node's charts, from its own ring (the others' proxied by the viewer).
      await page.waitForFunction(() => document.querySelectorAll('[data-node-charts] [data-chart^=cpu-] path[data-values]').length === 3, { timeout: 30_000 });
      await page.select('#nodes-window', '300');
      await textWhen(page, '[data-node-charts] .chart-axis', (t) => t.startsWith('5 min ago'));
      await shot(page, 'nodes');

      // Current first: one row per slot, the drained node's old task folded under its slot.
      await page.goto(`http://${viewer.apiAddress}/ui/#services/web`);
      await page.waitForFunction(() => document.querySelectorAll('tr[data-current]').length === 3, { timeout: 30_000 });
      const slots = await page.$$eval('tr[data-current]', (rows) => rows.map((r) => r.getAttribute('data-task-state')));
      expect(slots).toEqual(['running', 'running', 'running']);
      expect(await page.$$eval('tr.earlier', (rows) => rows.length)).toBe(0);
      const folded = await page.$$eval('tr[data-current] button[data-earlier]', (bs) => bs.map((b) => Number(/(\d+) earlier/.exec(b.textContent ?? '')?.[1] ?? 0)));
      const earlier = folded.reduce((a, b) => a + b, 0);
      expect(earlier).toBeGreaterThanOrEqual(1);
      const { tasks: all } = await sys.service('web');
      expect(earlier).toBe(all.length - 3);
      // Unfolded from the keyboard: each slot's history appears under it, the drained node's among it.
      for (let i = 0; i < folded.length; i++) {
        const buttons = await page.$$('tr[data-current] button[data-earlier][aria-expanded=false]');
        const first = buttons[0];
        if (first === undefined) break;
        await first.focus();
        await page.keyboard.press('Enter');
      }
      await page.waitForFunction((n: number) => document.querySelectorAll('tr.earlier').length === n, { timeout: 10_000 }, earlier);
      expect(await page.$$eval('tr.earlier', (rows) => rows.map((r) => r.getAttribute('data-task-node')))).toContain(target);
      await page.waitForSelector('[data-chart=running-web] path[data-line=running]');
      await page.select('#service-window', '300');
      await textWhen(page, '[data-chart=running-web] .chart-axis', (t) => t.startsWith('5 min ago'));
      await shot(page, 'services');

      // A compose stack: the Stacks view lists it with its tasks running and a link to its service.
      const compose = 'services:\n  tick:\n    image: ' + testImage + '\n    command: ["sleep", "3600"]\n    network_mode: host\n    stop_grace_period: 1s\n';
      const deployed = await fetch(`http://${viewer.apiAddress}/v1/stacks/tools/deploy`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ files: [{ path: 'compose.yaml', text: compose }] }) });
      expect(deployed.status, await deployed.clone().text()).toBe(200);
      await page.goto(`http://${viewer.apiAddress}/ui/#stacks`);
      await textWhen(page, 'tr[data-stack=tools]', (t) => t.includes('1/1') && t.includes('tools-tick'), 60_000);
      expect(await page.$eval('tr[data-stack=tools] a', (a) => a.getAttribute('href'))).toBe('#services/tools-tick');
      await shot(page, 'stacks');

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
