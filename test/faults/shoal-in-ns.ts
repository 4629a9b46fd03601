// Starts `shoal serve` inside a lab's network namespace and waits until its client API answers:
// the labs that run whole machines (bench/lib/machine-lab.ts, test/net/mesh-lab.ts) share it.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, sleep } from './http.ts';
import type { NetLab } from './netns.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const binPath = path.join(repoRoot, 'bin', 'shoal.js');

/** A machine of a lab: `proc` is its running shoal, undefined once it exited. */
export interface ShoalHost {
  slot: number;
  name: string;
  api: string;
  proc: ChildProcess | undefined;
}

/**
 * Runs `shoal serve --config <config>` in the host's namespace, its output appended to `log`
 * (`detached`: in a process group of its own), and resolves once GET /healthz answers; throws
 * when it exits first or does not answer within `serveWithinMs`.
 */
export async function startShoalIn(lab: NetLab, host: ShoalHost, o: { config: string; log: string; detached?: boolean; serveWithinMs: number }): Promise<void> {
  const fd = openSync(o.log, 'a');
  try {
    host.proc = spawn('ip', ['netns', 'exec', lab.ns(host.slot), process.execPath, binPath, 'serve', '--config', o.config], {
      cwd: repoRoot, stdio: ['ignore', fd, fd], detached: o.detached ?? false,
    });
  } finally {
    closeSync(fd);
  }
  const proc = host.proc;
  proc.once('exit', () => { if (host.proc === proc) host.proc = undefined; });
  for (const until = Date.now() + o.serveWithinMs; Date.now() < until;) {
    const r = await call(host.api, '/healthz', { timeoutMs: 1000 });
    if (r.kind === 'answer') return;
    if (host.proc === undefined) throw new Error(`${host.name} exited while starting; see ${o.log}`);
    await sleep(100);
  }
  throw new Error(`${host.name} did not serve within ${o.serveWithinMs / 1000} s; see ${o.log}`);
}
