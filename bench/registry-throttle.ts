// Pull before stop from a slow registry (issue 40's figure): a stop-first rolling update of a
// one-replica service whose new image comes through a throttled path, on three real `shoal
// serve` processes and the machine's Docker. The registry is Debian's `docker-registry` with TLS
// and a login (test/support/registry.ts); in front of it a TCP proxy lets `--rate` bytes/s through
// to the client (test/support/throttle-proxy.ts), and the service's image names the proxy.
//
//   flock /tmp/shoal-heavy.lock npm run bench:registry-throttle -- [--size-mib 4] [--rate-kib 1024] [--rounds 3] [--write]
//
// Each round builds two images of the same size (a unique random layer of --size-mib on the test
// image) and pushes both: one is pulled alone through the proxy (the pull's duration), the other
// is the update's new image. The update's times come from Docker's own events: the image's pull
// (when it finished), the old container's `die` and the new one's `start`; the slot is down from
// the die to the start. Without pulling before the stop the slot would be down for the pull too.
// --write replaces the "registry-throttle" section of bench/RESULTS.md.

import os from 'node:os';
import { parseArgs } from 'node:util';
import { serviceDoc, DockerSystem } from '../test/system/docker-system.ts';
import { buildSizedImage, TestRegistry } from '../test/support/registry.ts';
import { ThrottleProxy } from '../test/support/throttle-proxy.ts';
import { writeNamedSection } from './lib/report.ts';

interface Round {
  round: number;
  /** The twin image pulled alone through the proxy (s). */
  pullAloneS: number;
  /** From the update's apply to Docker's pull event of the new image (s). */
  applyToPulledS: number;
  /** Docker's pull event of the new image, then the old container's die: > 0 when the pull ended first (s). */
  pulledBeforeDieS: number;
  /** The old container's die to the new one's start: the slot's downtime (s). */
  downS: number;
  /** The apply to the new container's start (s). */
  applyToStartS: number;
}

/** Docker's pull events of repository `repo` since `sinceS` (s since the epoch), but the twins', as ns. */
async function pullEvents(sys: DockerSystem, repo: string, sinceS: number): Promise<bigint[]> {
  const stream = await sys.docker.getEvents({ since: sinceS, until: Math.ceil(Date.now() / 1000) + 1, filters: { type: ['image'], event: ['pull'] } }) as unknown as NodeJS.ReadableStream;
  const text = await new Promise<string>((resolve, reject) => {
    let out = '';
    stream.on('data', (c: Buffer) => { out += c.toString(); });
    stream.on('end', () => resolve(out));
    stream.on('error', reject);
  });
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { id: string; timeNano: number })
    .filter((e) => e.id.startsWith(repo) && !e.id.includes(':twin')).map((e) => BigInt(e.timeNano));
}

const seconds = (ns: bigint): number => Number(ns) / 1e9;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'size-mib': { type: 'string', default: '4' }, 'rate-kib': { type: 'string', default: '1024' },
      rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false },
    },
  });
  const sizeMiB = Number(values['size-mib']);
  const rateKiB = Number(values['rate-kib']);
  const rounds = Number(values.rounds);
  if (!(sizeMiB > 0) || !(rateKiB > 0) || !(rounds >= 1)) throw new Error('--size-mib, --rate-kib and --rounds must be positive numbers');
  const sys = new DockerSystem({});
  const registry = new TestRegistry();
  let proxy: ThrottleProxy | undefined;
  const local: string[] = [];
  const results: Round[] = [];
  try {
    await sys.start();
    await registry.start(sys.docker);
    proxy = new ThrottleProxy(registry.address, rateKiB * 1024);
    const proxyHost = `${registry.address.host}:${await proxy.start(registry.address.host)}`;
    registry.trustAlias(proxyHost);
    const leader = await sys.leader();
    const login = await fetch(`http://${leader.apiAddress}/v1/registries/${proxyHost}`, {
      method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: registry.username, password: registry.password }), signal: AbortSignal.timeout(10_000),
    });
    if (login.status !== 200) throw new Error(`registry login failed: ${login.status} ${await login.text()}`);
    const auth = { username: registry.username, password: registry.password, serveraddress: proxyHost };
    const push = async (tag: string): Promise<string> => {
      const src = `shoal-bench/registry-throttle:${tag}`;
      await buildSizedImage(src, sizeMiB);
      await registry.push(sys.docker, src, 'bench/app', tag);
      await sys.docker.getImage(src).remove();
      return `${proxyHost}/bench/app:${tag}`;
    };
    const doc = (image: string): Record<string, unknown> => serviceDoc('slow', { image, replicas: 1, update: { order: 'stop-first', parallelism: 1 } });
    const first = await push('r0');
    local.push(first);
    await sys.apply(doc(first));
    await sys.waitConverged('slow', 180_000);
    for (let i = 1; i <= rounds; i++) {
      // The pull alone, of a twin image of the same size, through the same proxy.
      const twin = await push(`twin${i}`);
      const t0 = process.hrtime.bigint();
      const stream = await sys.docker.pull(twin, { authconfig: auth }) as NodeJS.ReadableStream;
      await new Promise<void>((resolve, reject) => sys.docker.modem.followProgress(stream, (err: Error | null) => (err === null ? resolve() : reject(err))));
      const pullAloneS = seconds(process.hrtime.bigint() - t0);
      await sys.docker.getImage(twin).remove();
      // The update.
      const next = await push(`r${i}`);
      local.push(next);
      const sinceS = Math.floor(Date.now() / 1000) - 1;
      const applyNs = BigInt(Date.now()) * 1_000_000n;
      const a = await sys.api<{ services: Array<{ specVersion: number }> }>('POST', '/v1/apply', { documents: [doc(next)] });
      if (a.status !== 200) throw new Error(`apply failed: ${a.status}`);
      const version = a.body.services[0]?.specVersion ?? 0;
      await sys.waitFor(`update ${i} done`, async () => {
        const s = await sys.service('slow');
        return s.service.record.specVersion === version && s.service.status.converged ? true : undefined;
      }, 300_000);
      const log = sys.events;
      if (log === undefined) throw new Error('no event log');
      await log.catchUp(sys.cluster.clusterId);
      const die = log.events.find((e) => e.action === 'die' && e.service === 'slow' && e.specVersion === version - 1 && e.timeNs >= applyNs);
      const start = log.events.find((e) => e.action === 'start' && e.service === 'slow' && e.specVersion === version);
      const pulled = (await pullEvents(sys, `${proxyHost}/bench/app`, sinceS)).filter((t) => t >= applyNs).sort((x, y) => (x < y ? -1 : 1))[0];
      if (die === undefined || start === undefined || pulled === undefined) throw new Error(`round ${i}: missing events (die ${String(die !== undefined)}, start ${String(start !== undefined)}, pull ${String(pulled !== undefined)})`);
      results.push({
        round: i, pullAloneS, applyToPulledS: seconds(pulled - applyNs), pulledBeforeDieS: seconds(die.timeNs - pulled),
        downS: seconds(start.timeNs - die.timeNs), applyToStartS: seconds(start.timeNs - applyNs),
      });
      console.log(JSON.stringify(results[results.length - 1]));
    }
  } finally {
    await sys.close().catch((err: unknown) => console.error(String(err)));
    for (const ref of local) await sys.docker.getImage(ref).remove().catch(() => undefined);
    await proxy?.close();
    await registry.close();
  }
  const text = report(results, sizeMiB, rateKiB);
  console.log(text);
  if (values.write) writeNamedSection('registry-throttle', text);
}

function report(rs: Round[], sizeMiB: number, rateKiB: number): string {
  const f = (n: number): string => n.toFixed(2);
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return [
    '## Pull before stop from a throttled registry (issue 40)',
    '',
    `Command: \`flock /tmp/shoal-heavy.lock npm run bench:registry-throttle -- --size-mib ${sizeMiB} --rate-kib ${rateKiB} --rounds ${rs.length} --write\``,
    `Machine: ${os.cpus().length} cores (${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}; shared with other work (1-minute load average ${os.loadavg()[0]?.toFixed(1) ?? '?'} at the end); ${new Date().toISOString().slice(0, 10)}`,
    '',
    `Three \`shoal serve\` processes on the machine's Docker; Debian's docker-registry (TLS, htpasswd login) behind a TCP proxy that lets ${rateKiB} KiB/s through to the client; a one-replica stop-first service updated to a new image of ${sizeMiB} MiB of its own (one random layer). Times from Docker's events.`,
    '',
    '| round | pull alone (s) | apply → pulled (s) | pulled → old task stopped (s) | slot down: old died → new started (s) | apply → new start (s) |',
    '|---|---|---|---|---|---|',
    ...rs.map((r) => `| ${r.round} | ${f(r.pullAloneS)} | ${f(r.applyToPulledS)} | ${f(r.pulledBeforeDieS)} | ${f(r.downS)} | ${f(r.applyToStartS)} |`),
    '',
    'The slot is down from the old container\'s `die` to the new one\'s `start` (the new task is created once the old one is reported stopped, then placed and started). The pull ended before the stop: "pulled → old task stopped" is about the stop itself, the service\'s 1 s grace period (`sleep` ignores SIGTERM, so Docker kills it at the end of it). The download is not in the downtime; without the pull before the stop the slot would be down for the pull as well (the "pull alone" column, on top).',
  ].join('\n');
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack ?? err.message : String(err));
  process.exit(1);
});
