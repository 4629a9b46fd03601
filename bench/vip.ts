// Virtual IP failover (issue 38): three `shoal serve` processes (memory runtime), each in its own
// network namespace on one LAN bridge, and a LAN client in a fourth namespace; the nodes' config
// names one VIP of the LAN, with the defaults (lease 8 s + margin, node health down after 4 s).
// Each round stops the holder's machine (its shoal's process group SIGKILLed and all its links
// cut, the client's included) and measures, from that moment, polling every 50 ms:
//   - when the old holder's kernel dropped the address (its lifetime; nothing of shoal runs there),
//   - when another node had it,
//   - when the client's ping to the VIP was answered again;
// then a partition round: the holder cut off from the other nodes alone (its shoal running), the
// same times. Never two holders at once is checked on every poll. Then the machine comes back.
//
//   flock /tmp/shoal-heavy.lock nice -n 19 npx tsx bench/vip.ts [--rounds 3] [--write]
//
// --write replaces the "vip" section of bench/RESULTS.md. keepalived is not measured beside it
// (not done: see the section).

import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { leaseDefaults, replaceAfterMs } from '../src/resources/lease.ts';
import { nodeHealthDefaults } from '../src/control/node-health.ts';
import { sleep } from '../test/faults/http.ts';
import { cutsBetween, NetLab } from '../test/faults/netns.ts';
import { startShoalIn } from '../test/faults/shoal-in-ns.ts';
import { vipNodes, type VipNode } from '../test/system/vip-lab.ts';
import { writeNamedSection } from './lib/report.ts';

type Node = VipNode;

function exec(argv: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(argv[0] ?? '', argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    c.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    c.once('error', () => resolve({ code: null, out }));
    c.once('close', (code) => resolve({ code, out }));
  });
}

interface Round { kind: 'machine stops' | 'partition'; droppedMs: number; takenMs: number; answeredMs: number; overlap: boolean }

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false } } });
  const lab = await NetLab.create(4);
  const client = 4;
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-vip-bench-'));
  const nodes: Node[] = [];
  try {
    const made = await vipNodes(lab, runDir, 'vip-bench');
    nodes.push(...made.nodes);
    const vip = made.vip;
    const start = (n: Node): Promise<void> => startShoalIn(lab, n, { config: path.join(n.dir, 'shoal.yaml'), log: path.join(runDir, `${n.name}.log`), detached: true, serveWithinMs: 30_000 });
    const kill = async (n: Node): Promise<void> => {
      const proc = n.proc;
      if (proc?.pid === undefined) return;
      const exited = new Promise((r) => proc.once('exit', r));
      try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
      await exited;
    };
    const holders = async (): Promise<Node[]> => {
      const r = await Promise.all(nodes.map((n) => exec(['ip', '-n', lab.ns(n.slot), '-j', '-4', 'addr', 'show', 'dev', 'eth0'])));
      return nodes.filter((_, i) => (r[i]?.out ?? '').includes(`"local":"${vip}"`));
    };
    const answers = async (): Promise<boolean> => (await exec(['ip', 'netns', 'exec', lab.ns(client), 'ping', '-c', '1', '-W', '1', vip])).code === 0;
    const settled = async (): Promise<Node> => {
      for (const until = Date.now() + 90_000; Date.now() < until; await sleep(200)) {
        const h = await holders();
        if (h.length === 1 && h[0] !== undefined && await answers()) return h[0];
      }
      throw new Error(`no node holds the VIP; logs in ${runDir}`);
    };
    await Promise.all(nodes.map((n) => start(n)));
    const rounds: Round[] = [];
    const measure = async (kind: Round['kind'], old: Node, t0: number): Promise<Round> => {
      let droppedMs = Number.NaN;
      let takenMs = Number.NaN;
      let answeredMs = Number.NaN;
      let overlap = false;
      let asking: Promise<void> | null = null;
      for (const until = t0 + 90_000; Date.now() < until && (Number.isNaN(takenMs) || Number.isNaN(answeredMs)); await sleep(50)) {
        const h = await holders();
        const now = Date.now() - t0;
        if (h.length > 1) overlap = true;
        if (Number.isNaN(droppedMs) && !h.includes(old)) droppedMs = now;
        if (Number.isNaN(takenMs) && h.some((n) => n !== old)) takenMs = now;
        asking ??= answers().then((ok) => {
          if (ok && Number.isNaN(answeredMs) && h.some((n) => n !== old)) answeredMs = Date.now() - t0;
          asking = null;
        });
      }
      return { kind, droppedMs, takenMs, answeredMs, overlap };
    };
    for (let i = 0; i < Number(values.rounds); i++) {
      const old = await settled();
      const t0 = Date.now();
      await Promise.all([kill(old), lab.setCuts(cutsBetween([old.slot], [1, 2, 3, 4].filter((s) => s !== old.slot)))]);
      const r = await measure('machine stops', old, t0);
      console.log(`round ${i + 1} (${r.kind}): old dropped ${r.droppedMs} ms, new holder ${r.takenMs} ms, client answered ${r.answeredMs} ms${r.overlap ? ' (TWO HOLDERS)' : ''}`);
      rounds.push(r);
      await lab.heal();
      await start(old);
    }
    {
      const old = await settled();
      const t0 = Date.now();
      await lab.setCuts(cutsBetween([old.slot], nodes.filter((n) => n !== old).map((n) => n.slot)));
      const r = await measure('partition', old, t0);
      console.log(`partition: old dropped ${r.droppedMs} ms, new holder ${r.takenMs} ms, client answered ${r.answeredMs} ms${r.overlap ? ' (TWO HOLDERS)' : ''}`);
      rounds.push(r);
      await lab.heal();
    }
    const row = (r: Round, i: number): string => `| ${i + 1} | ${r.kind} | ${r.droppedMs} | ${r.takenMs} | ${r.answeredMs} | ${r.overlap ? 'YES' : 'no'} |`;
    const text = [
      '## Virtual IP: failover when the holder\'s machine stops, and under a partition (issue 38; three nodes and a LAN client in namespaces)',
      '',
      `\`npx tsx bench/vip.ts --rounds ${values.rounds}\`, ${new Date().toISOString().slice(0, 10)}: the defaults (lease ${leaseDefaults.leaseMs} ms, the leader waits `
        + `${replaceAfterMs(leaseDefaults)} ms after the last renewal it applied; node health down after ${nodeHealthDefaults.downAfterMs} ms). A machine stop is its shoal's `
        + 'process group SIGKILLed and its links cut (the client\'s too); a partition cuts the holder from the other nodes only. Times from that moment, polled every 50 ms: '
        + 'the old holder\'s kernel dropping the address, another node having it, the client\'s ping answered. Target (issue 38): answering on another node within 5 s; never two holders.',
      '',
      '| round | fault | old holder dropped it (ms) | new holder has it (ms) | client answered (ms) | two holders |',
      '|---|---|---|---|---|---|',
      ...rounds.map(row),
      '',
      'The 5 s target is not met with the defaults: the new holder waits for the old lease plus its margin, which is what makes a partition safe. '
        + 'keepalived was not measured beside it (not done in this change).',
    ].join('\n');
    console.log(text);
    if (values.write) writeNamedSection('vip', text);
  } finally {
    for (const n of nodes) {
      const pid = n.proc?.pid;
      if (pid !== undefined) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
    }
    await lab.destroy();
  }
}

await main();
