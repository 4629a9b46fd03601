// promtool (from Debian's `prometheus` package; .ci/run installs it): the reference parser and
// linter of the Prometheus text format and rules files.

import { spawnSync } from 'node:child_process';

export interface PromtoolResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function promtool(args: string[], input?: string): PromtoolResult {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8', timeout: 60_000 });
  if (r.error !== undefined) {
    throw new Error(`promtool could not run (${r.error.message}); install Debian's prometheus package (apt-get install --no-install-recommends prometheus), as .ci/run does`);
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The metric families of a text exposition, by their # TYPE lines: name -> type. */
export function families(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1] as string, m[2] as string);
  return out;
}

/**
 * Whether `name` is exposed by `fams`, as a family or as one of a histogram's or summary's
 * series (`_bucket`, `_sum`, `_count`).
 */
export function exposes(fams: Map<string, string>, name: string): boolean {
  if (fams.has(name)) return true;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  const type = fams.get(base);
  return base !== name && (type === 'histogram' || type === 'summary');
}
