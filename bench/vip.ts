// Virtual IP failover (issue 38): three `shoal serve` processes (memory runtime), each in its own
// network namespace on one LAN bridge, and a LAN client in a fourth namespace; the nodes' config
// names one VIP of the LAN, with the defaults (VIP lease 3 s renewed every second; the leader
// waits lease + margin after the last renewal it applied). Each round stops the holder's machine
// (its shoal's process group SIGKILLed and all its links cut, the client's included) and
// measures, from that moment, polling every 50 ms:
//   - when the old holder's kernel dropped the address (its lifetime; nothing of shoal runs there),
//   - when another node had it,
//   - when the client's ping to the VIP was answered again,
//   - a client's request loop (curl to VIP:8080 every 100 ms, a small HTTP server on each node):
//     how many requests failed, and from when to when;
// then a partition round: the holder cut off from the other nodes alone (its shoal running), the
// same times. Never two holders at once is checked on every poll. Then what the VIP lease costs:
// the renewals committed per second (shoal.vip-leases) beside all committed writes of the idle
// cluster.
//
// Then keepalived (Debian's, 2.2.7) in the same namespaces, with shoal stopped: VRRP with 1 s
// adverts, priorities 150/100/50, the same machine-stop rounds and the same partition (which,
// by design, leaves two masters). keepalived is not installed by the bench: without it that part
// is skipped with a message (apt-get install -y --no-install-recommends keepalived).
//
//   flock /tmp/shoal-heavy.lock nice -n 19 npx tsx bench/vip.ts [--rounds 3] [--ipv6] [--write]
//
// --write replaces the "vip" section of bench/RESULTS.md ("vip6" with --ipv6).
// --ipv6: the same shoal rounds with an IPv6 VIP (fd00:38::100 on a LAN fd00:38::/64; each
// namespace's own address added without DAD, the VIP's with it, as the agent adds it), and no
// keepalived part.

import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { leaseDefaults } from '../src/resources/lease.ts';
import { nodeHealthDefaults } from '../src/control/node-health.ts';
import { isIpv6, kernelLateMs, kernelLateMs6, vipCommandMs, vipLeaseDefaults, vipMoveAfterMs } from '../src/resources/vips.ts';
import { call, sleep } from '../test/faults/http.ts';
import { cutsBetween, NetLab } from '../test/faults/netns.ts';
import { startShoalIn } from '../test/faults/shoal-in-ns.ts';
import { exec, lab6, vipHolders, vipNodes, type VipNode } from '../test/system/vip-lab.ts';
import { writeNamedSection } from './lib/report.ts';

type Node = VipNode;

interface Round {
  kind: 'machine stops' | 'partition';
  droppedMs: number; takenMs: number; answeredMs: number;
  /** First poll with two holders (ms), or NaN: never. */
  twoMs: number;
  /** The client's request loop: requests sent, failed, and the span of the failures (ms from the fault). */
  loop?: { sent: number; failed: number; firstFailMs: number; lastFailMs: number };
}

/** A process group started in a namespace (detached), killed as a machine stop kills it. */
interface GroupProc { pid: number | undefined; exited: Promise<unknown> }

function startIn(lab: NetLab, slot: number, argv: string[], log: string): GroupProc {
  const fd = openSync(log, 'a');
  try {
    const c = spawn('ip', ['netns', 'exec', lab.ns(slot), ...argv], { stdio: ['ignore', fd, fd], detached: true });
    return { pid: c.pid, exited: new Promise((r) => c.once('exit', r)) };
  } finally {
    closeSync(fd);
  }
}

async function killGroup(p: GroupProc | undefined): Promise<void> {
  if (p?.pid === undefined) return;
  try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ }
  await p.exited;
}

/** The lab's VIP watcher: which of the three nodes have `vip` on eth0; whether the client's ping answers. */
function watcher(lab: NetLab, vip: string, client: number) {
  const holders = (): Promise<number[]> => vipHolders(lab, [1, 2, 3], vip);
  const answers = async (): Promise<boolean> => (await exec(['ip', 'netns', 'exec', lab.ns(client), 'ping', ...(isIpv6(vip) ? ['-6'] : []), '-c', '1', '-W', '1', vip])).code === 0;
  const settled = async (what: string): Promise<number> => {
    for (const until = Date.now() + 90_000; Date.now() < until; await sleep(200)) {
      const h = await holders();
      if (h.length === 1 && h[0] !== undefined && await answers()) return h[0];
    }
    throw new Error(`no single ${what} holder of ${vip} within 90 s`);
  };
  /** Polls every 50 ms until another node has it and the client is answered (or `maxMs`; a partition watches `watchMs` at least). */
  const measure = async (kind: Round['kind'], old: number, t0: number, o: { maxMs?: number; watchMs?: number } = {}): Promise<Round> => {
    let droppedMs = Number.NaN;
    let takenMs = Number.NaN;
    let answeredMs = Number.NaN;
    let twoMs = Number.NaN;
    let asking: Promise<void> | null = null;
    const done = (now: number): boolean => !Number.isNaN(takenMs) && !Number.isNaN(answeredMs) && now >= (o.watchMs ?? 0);
    for (const until = t0 + (o.maxMs ?? 90_000); Date.now() < until && !done(Date.now() - t0); await sleep(50)) {
      const h = await holders();
      const now = Date.now() - t0;
      if (h.length > 1 && Number.isNaN(twoMs)) twoMs = now;
      if (Number.isNaN(droppedMs) && !h.includes(old)) droppedMs = now;
      if (Number.isNaN(takenMs) && h.some((n) => n !== old)) takenMs = now;
      asking ??= answers().then((ok) => {
        if (ok && Number.isNaN(answeredMs) && h.some((n) => n !== old)) answeredMs = Date.now() - t0;
        asking = null;
      });
    }
    return { kind, droppedMs, takenMs, answeredMs, twoMs };
  };
  return { holders, answers, settled, measure };
}

/** A LAN client's request loop: curl to VIP:8080 every 100 ms (0.5 s timeout each) until stopped. */
function requestLoop(lab: NetLab, client: number, vip: string, t0: number): { stop(): Promise<NonNullable<Round['loop']>> } {
  let running = true;
  const fails: number[] = [];
  let sent = 0;
  const done = (async () => {
    while (running) {
      const at = Date.now();
      sent++;
      const r = await exec(['ip', 'netns', 'exec', lab.ns(client), 'curl', '-s', '-o', '/dev/null', '-m', '0.5', `http://${isIpv6(vip) ? `[${vip}]` : vip}:8080/`]);
      if (r.code !== 0) fails.push(at - t0);
      await sleep(Math.max(0, 100 - (Date.now() - at)));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return { sent, failed: fails.length, firstFailMs: fails[0] ?? Number.NaN, lastFailMs: fails.at(-1) ?? Number.NaN };
    },
  };
}

/** What the VIP lease costs: its renewals committed per second, beside all committed writes of the cluster, over `ms`. */
async function leaseCost(nodes: Node[], holder: Node, ms: number): Promise<{ renewalsPerS: number; writesPerS: number }> {
  const read = async (): Promise<{ seq: number; rev: number }> => {
    const lease = await call(nodes[0]?.api ?? '', `/v1/docs/shoal.vip-leases/${holder.id}`, { timeoutMs: 3_000 });
    const vips = await call(nodes[0]?.api ?? '', '/v1/vips', { timeoutMs: 3_000 });
    const seq = lease.kind === 'answer' ? Number((lease.body as { doc?: { seq?: unknown } } | undefined)?.doc?.seq) : Number.NaN;
    const rev = vips.kind === 'answer' ? Number((vips.body as { rev?: unknown } | undefined)?.rev) : Number.NaN;
    return { seq, rev };
  };
  const a = await read();
  await sleep(ms);
  const b = await read();
  return { renewalsPerS: ((b.seq - a.seq) * 1000) / ms, writesPerS: ((b.rev - a.rev) * 1000) / ms };
}

function keepalivedConf(slot: number, vip: string): string {
  const prio = [150, 100, 50][slot - 1] ?? 10;
  return [
    'global_defs {', `  router_id n${slot}`, '  enable_script_security', '}',
    'vrrp_instance VI_1 {', '  state BACKUP', '  interface eth0', '  virtual_router_id 51', `  priority ${prio}`, '  advert_int 1',
    '  virtual_ipaddress {', `    ${vip}/32 dev eth0`, '  }', '}', '',
  ].join('\n');
}

/** What the rounds say about the targets, in words. */
function summary(shoal: readonly Round[], ka: readonly Round[]): string[] {
  const stops = (rs: readonly Round[]): Round[] => rs.filter((r) => r.kind === 'machine stops');
  const range = (xs: number[]): string => `${(Math.min(...xs) / 1000).toFixed(1)}-${(Math.max(...xs) / 1000).toFixed(1)} s`;
  const out: string[] = [];
  const s = stops(shoal);
  if (s.length > 0) {
    const worst = Math.max(...s.map((r) => r.answeredMs));
    out.push(`shoal: the client is answered on another node ${range(s.map((r) => r.answeredMs))} after the holder's machine stops: the 5 s target is ${worst <= 5_000 ? 'met' : '**not met**'}. `
      + `Two holders: ${shoal.some((r) => !Number.isNaN(r.twoMs)) ? '**seen**' : 'never, the partition included (the old holder\'s kernel dropped the address before another node took it)'}.`);
  }
  const k = stops(ka);
  const kp = ka.find((r) => r.kind === 'partition');
  if (k.length > 0) {
    out.push(`keepalived: ${range(k.map((r) => r.answeredMs))} (three missed adverts and the skew of its priority: 3 × 1 s + (256 − priority)/256 s). `
      + (kp === undefined ? '' : Number.isNaN(kp.twoMs) ? 'Under the partition it did not end with two masters.' : `Under the partition it ended with two masters from ${fmt(kp.twoMs)} ms, for as long as the partition lasted: the cut-off node keeps the address (it hears no better master), the others elect one, and the LAN sees both answer ARP for it.`));
  }
  return out.flatMap((l, i) => (i === 0 ? [l] : ['', l]));
}

function fmt(n: number): string {
  return Number.isNaN(n) ? '-' : String(Math.round(n));
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false }, 'keepalived-only': { type: 'boolean', default: false }, ipv6: { type: 'boolean', default: false } } });
  const rounds = Number(values.rounds);
  const ipv6 = values.ipv6;
  const lab = await NetLab.create(4);
  if (ipv6) {
    for (const slot of [1, 2, 3, 4]) {
      const r = await exec(['ip', '-n', lab.ns(slot), 'addr', 'add', `${lab6.host(slot)}/64`, 'dev', 'eth0', 'nodad']);
      if (r.code !== 0) throw new Error(`cannot add ${lab6.host(slot)} in ${lab.ns(slot)}`);
    }
  }
  const client = 4;
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-vip-bench-'));
  const nodes: Node[] = [];
  const servers: GroupProc[] = [];
  const kas = new Map<number, GroupProc>();
  const shoalRounds: Round[] = [];
  const kaRounds: Round[] = [];
  let cost: { renewalsPerS: number; writesPerS: number } | undefined;
  let kaNote = '';
  try {
    const made = await vipNodes(lab, runDir, 'vip-bench', {}, ipv6 ? { address: lab6.vip, subnet: lab6.subnet } : undefined);
    nodes.push(...made.nodes);
    const vip = made.vip;
    // What the client's request loop reaches on the VIP: a small HTTP server on each node.
    for (const n of nodes) servers.push(startIn(lab, n.slot, [process.execPath, '-e', `require('http').createServer((q, r) => r.end('${n.name}')).listen(8080)`], path.join(runDir, `http-${n.name}.log`)));
    if (!values['keepalived-only']) {
      const start = (n: Node): Promise<void> => startShoalIn(lab, n, { config: path.join(n.dir, 'shoal.yaml'), log: path.join(runDir, `${n.name}.log`), detached: true, serveWithinMs: 30_000 });
      const kill = async (n: Node): Promise<void> => {
        const proc = n.proc;
        if (proc?.pid === undefined) return;
        const exited = new Promise((r) => proc.once('exit', r));
        try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
        await exited;
      };
      const w = watcher(lab, vip, client);
      const bySlot = (slot: number): Node => nodes.find((n) => n.slot === slot) ?? (() => { throw new Error(`no node ${slot}`); })();
      await Promise.all(nodes.map((n) => start(n)));
      for (let i = 0; i < rounds; i++) {
        const old = bySlot(await w.settled('shoal'));
        const t0 = Date.now();
        const loop = requestLoop(lab, client, vip, t0);
        await Promise.all([kill(old), lab.setCuts(cutsBetween([old.slot], [1, 2, 3, 4].filter((s) => s !== old.slot)))]);
        const r = await w.measure('machine stops', old.slot, t0);
        await sleep(1_000);
        r.loop = await loop.stop();
        console.log(`shoal round ${i + 1} (${r.kind}): old dropped ${r.droppedMs} ms, new holder ${r.takenMs} ms, client answered ${r.answeredMs} ms, requests failed ${r.loop.failed}/${r.loop.sent} (${r.loop.firstFailMs}-${r.loop.lastFailMs} ms)${Number.isNaN(r.twoMs) ? '' : ' (TWO HOLDERS)'}`);
        shoalRounds.push(r);
        await lab.heal();
        await start(old);
      }
      {
        const old = bySlot(await w.settled('shoal'));
        const t0 = Date.now();
        await lab.setCuts(cutsBetween([old.slot], nodes.filter((n) => n !== old).map((n) => n.slot)));
        const r = await w.measure('partition', old.slot, t0, { watchMs: 12_000 });
        console.log(`shoal partition: old dropped ${r.droppedMs} ms, new holder ${r.takenMs} ms, client answered ${r.answeredMs} ms${Number.isNaN(r.twoMs) ? '' : ' (TWO HOLDERS)'}`);
        shoalRounds.push(r);
        await lab.heal();
      }
      const holder = bySlot(await w.settled('shoal'));
      await sleep(5_000);
      cost = await leaseCost(nodes, holder, 30_000);
      console.log(`VIP lease: ${cost.renewalsPerS.toFixed(2)} renewals/s committed; the idle cluster commits ${cost.writesPerS.toFixed(2)} writes/s in all`);
      for (const n of nodes) await kill(n);
    }
    // keepalived beside it: the same namespaces, shoal stopped, another address of the LAN.
    if (ipv6) {
      kaNote = 'keepalived was not run with --ipv6 (the IPv4 run has it).';
    } else if (spawnSync('keepalived', ['--version']).error !== undefined) {
      kaNote = 'keepalived is not installed here, so it was not measured (apt-get install -y --no-install-recommends keepalived, then run the bench again).';
      console.log(kaNote);
    } else {
      const kaVip = vip.replace(/\.\d+$/, '.201');
      const w = watcher(lab, kaVip, client);
      const startKa = async (slot: number): Promise<void> => {
        const dir = path.join(runDir, `ka${slot}`);
        spawnSync('mkdir', ['-p', dir]);
        writeFileSync(path.join(dir, 'keepalived.conf'), keepalivedConf(slot, kaVip));
        kas.set(slot, startIn(lab, slot, ['keepalived', '-n', '-l', '-D', '-P', '-f', path.join(dir, 'keepalived.conf'), '-p', path.join(dir, 'keepalived.pid'), '-r', path.join(dir, 'vrrp.pid'), '-c', path.join(dir, 'checkers.pid')], path.join(runDir, `keepalived-n${slot}.log`)));
      };
      const stopKa = async (slot: number): Promise<void> => {
        await killGroup(kas.get(slot));
        kas.delete(slot);
        // A killed keepalived leaves its address (a plain one, no lifetime); a stopped machine has none.
        await exec(['ip', '-n', lab.ns(slot), 'addr', 'del', `${kaVip}/32`, 'dev', 'eth0']);
      };
      for (const slot of [1, 2, 3]) await startKa(slot);
      for (let i = 0; i < rounds; i++) {
        const old = await w.settled('keepalived');
        const t0 = Date.now();
        const loop = requestLoop(lab, client, kaVip, t0);
        await Promise.all([stopKa(old), lab.setCuts(cutsBetween([old], [1, 2, 3, 4].filter((s) => s !== old)))]);
        const r = await w.measure('machine stops', old, t0, { maxMs: 30_000 });
        await sleep(1_000);
        r.loop = await loop.stop();
        console.log(`keepalived round ${i + 1} (${r.kind}): new holder ${r.takenMs} ms, client answered ${r.answeredMs} ms, requests failed ${r.loop.failed}/${r.loop.sent} (${r.loop.firstFailMs}-${r.loop.lastFailMs} ms)`);
        kaRounds.push(r);
        await lab.heal();
        await startKa(old);
      }
      {
        const old = await w.settled('keepalived');
        const t0 = Date.now();
        await lab.setCuts(cutsBetween([old], [1, 2, 3].filter((s) => s !== old)));
        const r = await w.measure('partition', old, t0, { maxMs: 30_000, watchMs: 12_000 });
        const still = await w.holders();
        console.log(`keepalived partition: old dropped ${r.droppedMs} ms, new holder ${r.takenMs} ms, two holders from ${r.twoMs} ms; holders after 12 s: ${still.join(', ')}`);
        kaRounds.push(r);
        await lab.heal();
      }
      for (const slot of [...kas.keys()]) await stopKa(slot);
    }
    const row = (r: Round, i: number): string => `| ${i + 1} | ${r.kind} | ${fmt(r.droppedMs)} | ${fmt(r.takenMs)} | ${fmt(r.answeredMs)} | ${r.loop === undefined ? '-' : `${r.loop.failed}/${r.loop.sent}, ${fmt(r.loop.firstFailMs)}-${fmt(r.loop.lastFailMs)}`} | ${Number.isNaN(r.twoMs) ? 'no' : `**YES**, from ${fmt(r.twoMs)} ms`} |`;
    const head = ['| round | fault | old holder dropped it (ms) | new holder has it (ms) | client answered (ms) | client requests failed, when (ms) | two holders |', '|---|---|---|---|---|---|---|'];
    const cfg = { ...vipLeaseDefaults, driftRho: leaseDefaults.driftRho };
    const text = [
      ipv6 ? '## Virtual IP over IPv6: failover when the holder\'s machine stops, and under a partition (issue 38; three nodes and a LAN client in namespaces; the VIP fd00:38::100, announced by the kernel\'s unsolicited neighbour advertisement after DAD)'
        : '## Virtual IP: failover when the holder\'s machine stops, and under a partition, beside keepalived (issue 38; three nodes and a LAN client in namespaces)',
      '',
      `\`npx tsx bench/vip.ts --rounds ${rounds}${ipv6 ? ' --ipv6' : ''}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC: the defaults (VIP lease ${cfg.leaseMs} ms renewed every ${cfg.leaseMs / 3} ms; the leader moves a VIP `
        + `${vipMoveAfterMs(cfg, ipv6)} ms after the last renewal of its holder it applied: lease + 2ρ·lease + the kernel's lateness ${ipv6 ? kernelLateMs6 : kernelLateMs} ms + the command's ${vipCommandMs} ms; node health down after ${nodeHealthDefaults.downAfterMs} ms, `
        + 'which a VIP no longer waits for). A machine stop is its process group SIGKILLed and its links cut (the client\'s too); a partition cuts the holder from the other nodes only. Times from that moment, polled every 50 ms: '
        + 'the old holder\'s kernel dropping the address, another node having it, the client\'s ping answered; and a client\'s request loop (curl to VIP:8080 every 100 ms, 0.5 s timeout, a small HTTP server on every node). '
        + 'Target (issue 38): answering on another node within 5 s; never two holders.',
      '',
      '**shoal**',
      '',
      ...head,
      ...shoalRounds.map(row),
      '',
      ...(cost === undefined ? [] : [`What the shorter lease costs: ${cost.renewalsPerS.toFixed(2)} committed renewals a second (\`shoal.vip-leases\`, one per holding node per renewal, whatever its number of VIPs), where the idle three-node cluster commits ${cost.writesPerS.toFixed(2)} writes a second in all (30 s).`, '']),
      ...(ipv6 ? [kaNote] : [
        '**keepalived** (Debian\'s 2.2.7, VRRP, `advert_int 1`, priorities 150/100/50, preempting; the same namespaces with shoal stopped; a machine stop is keepalived SIGKILLed, its address removed with it and its links cut)',
        '',
        ...(kaNote !== '' ? [kaNote] : [...head, ...kaRounds.map(row)]),
      ]),
      '',
      ...summary(shoalRounds, kaRounds),
    ].join('\n');
    console.log(text);
    if (values.write) writeNamedSection(ipv6 ? 'vip6' : 'vip', text);
  } finally {
    for (const n of nodes) {
      const pid = n.proc?.pid;
      if (pid !== undefined) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
    }
    for (const p of [...servers, ...kas.values()]) if (p.pid !== undefined) try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ }
    await lab.destroy();
  }
}

await main();
