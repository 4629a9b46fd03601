// Virtual IP soak (issue 38): three `shoal serve` processes (memory runtime) in network namespaces
// on one LAN bridge, one VIP, the defaults (VIP lease 3 s renewed every second), for 30 minutes
// with both cores busy (`stress-ng --cpu 2` beside the nodes, at the nodes' priority) and a write
// load (document puts through the nodes' APIs, round robin, 20 a second), and no failure. The
// target: 0 VIP moves. Every second it reads which nodes have the address: a change of holder is a
// move, a second with none a blink (the address off on its holder: its renewals did not commit in
// time), two at once would break the rule. It also counts the `vip.moved` events the leader
// recorded beyond the first assignment.
//
//   flock /tmp/shoal-heavy.lock npx tsx bench/vip-soak.ts [--minutes 30] [--write]
//
// stress-ng is not installed by the bench (apt-get install -y --no-install-recommends stress-ng);
// without it the run stops at once and says so. --write replaces the "vip-soak" section of
// bench/RESULTS.md.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { call, sleep } from '../test/faults/http.ts';
import { NetLab } from '../test/faults/netns.ts';
import { startShoalIn } from '../test/faults/shoal-in-ns.ts';
import { vipHolders, vipNodes, type VipNode } from '../test/system/vip-lab.ts';
import { writeNamedSection } from './lib/report.ts';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { minutes: { type: 'string', default: '30' }, write: { type: 'boolean', default: false } } });
  const minutes = Number(values.minutes);
  if (!(minutes > 0)) throw new Error(`--minutes must be a positive number, not ${values.minutes}`);
  if (spawnSync('stress-ng', ['--version']).error !== undefined) {
    console.error('stress-ng is not installed, so the soak cannot keep both cores busy: apt-get install -y --no-install-recommends stress-ng, then run it again');
    process.exit(2);
  }
  const lab = await NetLab.create(3);
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-vip-soak-'));
  const nodes: VipNode[] = [];
  let hog: ReturnType<typeof spawn> | undefined;
  try {
    const made = await vipNodes(lab, runDir, 'vip-soak');
    nodes.push(...made.nodes);
    const vip = made.vip;
    await Promise.all(nodes.map((n) => startShoalIn(lab, n, { config: path.join(n.dir, 'shoal.yaml'), log: path.join(runDir, `${n.name}.log`), detached: true, serveWithinMs: 30_000 })));
    const holders = async (): Promise<string[]> => (await vipHolders(lab, nodes.map((n) => n.slot), vip)).map((slot) => `n${slot}`);
    for (const until = Date.now() + 90_000; (await holders()).length !== 1; await sleep(500)) {
      if (Date.now() > until) throw new Error(`no node took the VIP within 90 s; logs in ${runDir}`);
    }
    hog = spawn('stress-ng', ['--cpu', '2', '--timeout', `${Math.ceil(minutes * 60) + 30}s`, '--quiet'], { stdio: 'ignore', detached: true });
    let writes = 0;
    let writeFailures = 0;
    let running = true;
    const load = (async () => {
      for (let i = 0; running; i++) {
        const at = Date.now();
        const n = nodes[i % nodes.length];
        const r = await call(n?.api ?? '', `/v1/docs/soak/k${i % 200}`, { method: 'PUT', body: { i, at }, timeoutMs: 5_000 });
        writes++;
        if (r.kind !== 'answer' || r.status >= 300) writeFailures++;
        await sleep(Math.max(0, 50 - (Date.now() - at)));
      }
    })();
    let last = (await holders())[0];
    let moves = 0;
    let blinkSeconds = 0;
    let twoSeconds = 0;
    const t0 = Date.now();
    for (const end = t0 + minutes * 60_000; Date.now() < end; await sleep(1_000)) {
      const h = await holders();
      if (h.length === 0) blinkSeconds++;
      if (h.length > 1) twoSeconds++;
      if (h.length === 1 && h[0] !== last) {
        moves++;
        console.log(`${Math.round((Date.now() - t0) / 1000)} s: the VIP moved from ${last ?? '-'} to ${h[0]}`);
        last = h[0];
      }
    }
    running = false;
    await load;
    const ev = await call(nodes[0]?.api ?? '', '/v1/docs/shoal.events?limit=1000&consistency=stale', { timeoutMs: 5_000 });
    const items = ev.kind === 'answer' ? ((ev.body as { items?: { doc?: { type?: unknown; details?: { reason?: unknown } } }[] } | undefined)?.items ?? []) : [];
    const movedEvents = items.filter((d) => d.doc?.type === 'vip.moved' && d.doc.details?.reason !== 'assigned').length;
    const text = [
      '## Virtual IP soak: moves with both cores busy and a write load (issue 38)',
      '',
      `\`npx tsx bench/vip-soak.ts --minutes ${minutes}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC: three nodes (memory runtime) in namespaces, one VIP, the defaults; `
        + '`stress-ng --cpu 2` beside them; 20 document puts a second through the nodes\' APIs; no failure injected. Target: 0 VIP moves.',
      '',
      '| minutes | VIP moves (holder changes seen) | vip.moved events after the first assignment | seconds with no holder | seconds with two holders | writes (failed) |',
      '|---|---|---|---|---|---|',
      `| ${minutes} | ${moves} | ${movedEvents} | ${blinkSeconds} | ${twoSeconds} | ${writes} (${writeFailures}) |`,
    ].join('\n');
    console.log(text);
    if (values.write) writeNamedSection('vip-soak', text);
  } finally {
    if (hog?.pid !== undefined) try { process.kill(-hog.pid, 'SIGKILL'); } catch { /* gone */ }
    for (const n of nodes) {
      const pid = n.proc?.pid;
      if (pid !== undefined) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
    }
    await lab.destroy();
  }
}

await main();
