// The checks of `shoal doctor` (docs/operations.md, "Doctor"): pure functions of what was
// gathered (doctor.ts), each answering OK, WARN or FAIL with what to do, so each can be tested
// on made-up facts.

import type { View } from './cluster-view.ts';
import { mixedVersions } from './cluster-view.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  message: string;
  /** What to do about it (WARN and FAIL). */
  fix?: string;
}

export interface MemberFacts {
  name: string;
  id: string;
  reachable: boolean;
  /** The member's clock minus ours, from its answer's Date header (1 s resolution). */
  clockOffsetMs?: number;
  availBytes?: number;
  sizeBytes?: number;
}

/** Skew above this is worth a look; above skewFailMs, timestamps in events and tasks mislead. */
export const skewWarnMs = 2000;
export const skewFailMs = 30_000;
/** Free space under this share of the filesystem, or these bytes, is a warning (or a failure). */
export const diskWarnShare = 0.15;
export const diskFailShare = 0.05;
export const diskFailBytes = 1024 ** 3;
/** A certificate that expires within this many days is a warning. */
export const certWarnDays = 30;

const gib = (b: number): string => `${(b / 1024 ** 3).toFixed(1)} GiB`;

export function quorumCheck(view: View | undefined, addr: string): Check {
  const name = 'quorum';
  if (view === undefined) return { name, status: 'fail', message: `no node answered at ${addr}`, fix: 'start the nodes (shoal serve, or their service), or point --addr at a running member' };
  const voters = view.members.filter((m) => m.role === 'voter');
  const quorum = Math.floor(voters.length / 2) + 1;
  const up = voters.filter((m) => m.health === 'healthy' || m.health === 'lagging');
  if (view.leader === null) return { name, status: 'fail', message: `no leader (${view.view === 'local' ? 'this node cannot reach one' : 'election under way'}); ${up.length} of ${voters.length} voters reachable, a quorum is ${quorum}`, fix: 'bring voters back until a quorum answers; if two of three are gone for good, see "Recovery" in docs/operations.md' };
  if (up.length < quorum) return { name, status: 'fail', message: `${up.length} of ${voters.length} voters reachable; a quorum is ${quorum}`, fix: 'bring the unreachable voters back (shoal status lists them)' };
  const down = voters.filter((m) => !up.includes(m)).map((m) => m.name);
  if (down.length > 0) return { name, status: 'warn', message: `leader up, ${up.length} of ${voters.length} voters reachable (down: ${down.join(', ')}); one more failure may stop the cluster`, fix: `bring ${down.join(', ')} back, or remove it (shoal cluster remove) and add a replacement` };
  return { name, status: 'ok', message: `leader up, all ${voters.length} voters reachable` };
}

export function toleranceCheck(view: View | undefined): Check {
  const name = 'failure tolerance';
  if (view === undefined) return { name, status: 'skip', message: 'no cluster view' };
  const n = view.members.filter((m) => m.role === 'voter').length;
  const tolerates = Math.floor((n - 1) / 2);
  if (n === 1) return { name, status: 'warn', message: 'a lone voter: losing it stops the cluster', fix: 'add two members (shoal cluster add, then promote) for a cluster that survives one failure' };
  if (n % 2 === 0) return { name, status: 'warn', message: `${n} voters tolerate ${tolerates} failure(s), as ${n - 1} would, and need more for a quorum`, fix: `add or remove a voter to get an odd number` };
  return { name, status: 'ok', message: `${n} voters tolerate ${tolerates} failure(s)` };
}

export function clockCheck(members: readonly MemberFacts[]): Check {
  const name = 'clock skew';
  const offsets = members.filter((m) => m.clockOffsetMs !== undefined);
  if (offsets.length < 2) return { name, status: 'skip', message: 'fewer than two members answered' };
  const lo = offsets.reduce((a, m) => ((m.clockOffsetMs ?? 0) < (a.clockOffsetMs ?? 0) ? m : a));
  const hi = offsets.reduce((a, m) => ((m.clockOffsetMs ?? 0) > (a.clockOffsetMs ?? 0) ? m : a));
  const skew = (hi.clockOffsetMs ?? 0) - (lo.clockOffsetMs ?? 0);
  const text = `${(skew / 1000).toFixed(1)} s between ${hi.name} and ${lo.name} (from their answers' Date headers, to about a second)`;
  const fix = 'run a time daemon on every machine (systemd-timesyncd, chrony) and check it is synchronised (timedatectl)';
  if (skew > skewFailMs) return { name, status: 'fail', message: text, fix };
  if (skew > skewWarnMs) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: `within ${skewWarnMs / 1000} s (${text})` };
}

export function diskCheck(members: readonly MemberFacts[]): Check {
  const name = 'disk free';
  const known = members.filter((m) => m.availBytes !== undefined && m.sizeBytes !== undefined && m.sizeBytes > 0);
  if (known.length === 0) return { name, status: 'skip', message: 'no member reported its data directory\'s filesystem (GET /metrics)' };
  const rows = known.map((m) => ({ m, share: (m.availBytes ?? 0) / (m.sizeBytes ?? 1) }));
  const text = rows.map(({ m, share }) => `${m.name} ${gib(m.availBytes ?? 0)} (${(share * 100).toFixed(0)}%)`).join(', ');
  const fix = 'free space on the data directory\'s filesystem, or move the data directory to a larger one; a full disk stops the node (docs/operations.md, "When a disk stalls")';
  if (rows.some(({ m, share }) => share < diskFailShare || (m.availBytes ?? 0) < diskFailBytes)) return { name, status: 'fail', message: text, fix };
  if (rows.some(({ share }) => share < diskWarnShare)) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: text };
}

export function versionCheck(view: View | undefined): Check {
  const name = 'versions and feature level';
  if (view === undefined) return { name, status: 'skip', message: 'no cluster view' };
  const mixed = mixedVersions(view);
  const levels = view.members.map((m) => m.featureLevelMax).filter((l): l is number => typeof l === 'number');
  const level = view.featureLevel;
  if (mixed !== undefined) return { name, status: 'warn', message: `members run different versions: ${mixed}${level !== undefined ? `; feature level ${level}` : ''}`, fix: 'finish the rolling upgrade: every member on the same release' };
  if (level !== undefined && levels.length > 0 && Math.min(...levels) > level) return { name, status: 'warn', message: `feature level ${level}, every member supports ${Math.min(...levels)}`, fix: 'the leader raises it within a tick; if it stays, check the leader\'s log' };
  return { name, status: 'ok', message: `every member runs ${view.members[0]?.softwareVersion ?? 'the same version'}${level !== undefined ? `, feature level ${level}` : ''}` };
}

export function apiExposureCheck(apiListen: string | undefined): Check {
  const name = 'API exposure';
  if (apiListen === undefined) return { name, status: 'skip', message: 'needs --data (the node\'s config)' };
  const host = apiListen.slice(0, apiListen.lastIndexOf(':')).replace(/[[\]]/g, '');
  const loopback = host === 'localhost' || host.startsWith('127.') || host === '::1';
  if (loopback) return { name, status: 'ok', message: `the client API listens on ${apiListen} (loopback only)` };
  return { name, status: 'warn', message: `the client API listens on ${apiListen}, beyond loopback, without TLS or authentication: anyone who reaches it can write and run drills`, fix: 'bind api.listen to 127.0.0.1 and reach it through SSH or a proxy, or firewall the port to the machines that need it' };
}

export function certificateCheck(certs: readonly { file: string; notAfter: Date }[] | undefined, now: Date): Check {
  const name = 'certificates';
  if (certs === undefined) return { name, status: 'skip', message: 'needs --data (the node\'s certificates)' };
  const days = (d: Date): number => Math.floor((d.getTime() - now.getTime()) / 86_400_000);
  const text = certs.map((c) => `${c.file} expires ${c.notAfter.toISOString().slice(0, 10)} (${days(c.notAfter)} days)`).join('; ');
  const fix = 'renew the certificates before they expire: a node with an expired certificate is refused by its peers';
  if (certs.some((c) => c.notAfter <= now)) return { name, status: 'fail', message: text, fix };
  if (certs.some((c) => days(c.notAfter) < certWarnDays)) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: text };
}
