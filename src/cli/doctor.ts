// shoal doctor: checks the cluster and, with --data, this machine's node, and says for each check
// OK, WARN or FAIL with what to do (docs/operations.md, "Doctor"). What it gathers: the cluster
// view (GET /v1/cluster), each member's own answer (its Date header, for clock skew) and its
// /metrics (free space of its data directory); with --data, the node's config and certificates.

import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../server/config.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { resolveAddr, send } from './client.ts';
import { getView, type View } from './cluster-view.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsHelp } from './group.ts';
import {
  apiExposureCheck, certificateCheck, clockCheck, diskCheck, quorumCheck, toleranceCheck, versionCheck, type Check, type MemberFacts,
} from './doctor-checks.ts';

export const doctorHelp = `Usage: shoal doctor [--data DIR] [--addr HOST:PORT] [--json]

Checks the cluster and says for each check OK, WARN or FAIL, with what to do: a reachable quorum,
failure tolerance (a lone voter, an even number), clock skew between the members, free space on
each member's data directory, versions and the feature level; with --data, this machine's node:
its client API bound beyond loopback (no TLS or authentication), its certificates near expiry.

Options:
  --data DIR         the data directory of the node on this machine (its shoal.yaml and tls/)
${commonFlagsHelp}

Exit codes: 0 no check failed (warnings are printed); 1 a check failed; 2 usage error; 3 no node
answered at --addr (the quorum check fails too).`;

const memberTimeoutMs = 2000;

async function memberFacts(m: View['members'][number]): Promise<MemberFacts> {
  const facts: MemberFacts = { name: m.name, id: m.id, reachable: false };
  try {
    const sent = Date.now();
    const res = await send(m.apiAddress, '/v1/cluster?local', { signal: AbortSignal.timeout(memberTimeoutMs) });
    const received = Date.now();
    await res.arrayBuffer();
    facts.reachable = true;
    const date = res.headers.get('date');
    // The Date header has whole seconds: its second began up to 1 s before it was written.
    if (date !== null) facts.clockOffsetMs = Date.parse(date) + 500 - (sent + received) / 2;
    const text = await (await send(m.apiAddress, '/metrics', { signal: AbortSignal.timeout(memberTimeoutMs) })).text();
    const avail = metricValue(text, 'shoal_storage_filesystem_avail_bytes');
    const size = metricValue(text, 'shoal_storage_filesystem_size_bytes');
    if (avail !== undefined) facts.availBytes = avail;
    if (size !== undefined) facts.sizeBytes = size;
  } catch {
    // Unreachable, or no metrics: the checks say what they could not see.
  }
  return facts;
}

/** The value of an unlabelled sample in Prometheus text. */
export function metricValue(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  const v = line === undefined ? Number.NaN : Number(line.slice(name.length + 1).trim().split(' ')[0]);
  return Number.isFinite(v) ? v : undefined;
}

function localChecks(dataDir: string | undefined, now: Date): Check[] {
  if (dataDir === undefined) return [apiExposureCheck(undefined), certificateCheck(undefined, now)];
  const dir = path.resolve(dataDir);
  const configFile = path.join(dir, 'shoal.yaml');
  if (!existsSync(configFile)) throw new UsageError(`--data ${dataDir}: no shoal.yaml there; give the data directory of a node (shoal init made it)`);
  const config = loadConfig(configFile);
  const certs = ['ca.crt', 'node.crt'].map((f) => path.join(dir, 'tls', f)).filter((f) => existsSync(f))
    .map((f) => ({ file: path.relative(dir, f), notAfter: new Date(new X509Certificate(readFileSync(f)).validTo) }));
  return [apiExposureCheck(config.api.listen), certificateCheck(certs, now)];
}

const marks: Record<Check['status'], string> = { ok: 'OK  ', warn: 'WARN', fail: 'FAIL', skip: 'SKIP' };

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, data: { type: 'string' } }, doctorHelp);
  if (values.help) return help(doctorHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const local = localChecks(values.data, new Date());
  const view = await getView(addr).catch(() => undefined);
  const members = view === undefined ? [] : await Promise.all(view.members.map(memberFacts));
  const checks = [quorumCheck(view, addr), toleranceCheck(view), clockCheck(members), diskCheck(members), versionCheck(view), ...local];
  if (values.json) {
    console.log(JSON.stringify({ checks }, null, 2));
  } else {
    for (const c of checks) {
      console.log(`${marks[c.status]}  ${c.name.padEnd(26)} ${c.message}`);
      if (c.fix !== undefined && (c.status === 'warn' || c.status === 'fail')) console.log(`      ${''.padEnd(26)} -> ${c.fix}`);
    }
  }
  if (view === undefined) return exitCodes.unavailable;
  return checks.some((c) => c.status === 'fail') ? exitCodes.failed : exitCodes.ok;
}
