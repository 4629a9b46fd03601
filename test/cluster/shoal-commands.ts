// Long-running `shoal` commands (init, join, serve) as a test starts them by hand, with the end of
// each one's output kept for the failure message, and `until` that prints it when it gives up.
// Every process is killed by killAll() (afterAll).

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const shoalBin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));

export class ShoalCommands {
  private readonly procs: ChildProcess[] = [];
  /** Each started command's name and a reader of the end of its output. */
  private readonly tails: { name: string; text: () => string }[] = [];

  /** Starts `shoal ARGS`; `out` reads its standard output so far (the log is on standard error). */
  start(...args: string[]): { proc: ChildProcess; out: () => string } {
    const proc = spawn(process.execPath, [shoalBin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.procs.push(proc);
    let out = '';
    let err = '';
    proc.stdout?.on('data', (b: Buffer) => { out += b.toString(); });
    proc.stderr?.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-20_000); });
    this.tails.push({ name: args.slice(0, 6).join(' '), text: () => `${out.slice(-2000)}\n${err.split('\n').slice(-15).join('\n')}` });
    return { proc, out: () => out };
  }

  /** Polls `attempt` every 250 ms until it answers; past the deadline, fails with every command's output. */
  async until<T>(what: string, attempt: () => Promise<T | undefined> | T | undefined, timeoutMs = 90_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = await attempt();
      if (got !== undefined) return got;
      if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}\n${this.tails.map((t) => `--- ${t.name}\n${t.text()}`).join('\n')}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async killAll(): Promise<void> {
    await Promise.all(this.procs.map((p) => new Promise<void>((resolve) => {
      if (p.exitCode !== null || p.signalCode !== null) return resolve();
      p.once('exit', () => resolve());
      p.kill('SIGKILL');
    })));
  }
}

export interface Member { id: string; name: string; role: string }

/** `shoal cluster members --json` (with the credential the CLI finds, e.g. the one init wrote); undefined when it fails. */
export function clusterMembers(api: string): Promise<Member[] | undefined> {
  return new Promise((resolve) => {
    execFile(process.execPath, [shoalBin, 'cluster', 'members', '--json', '--addr', api], { timeout: 60_000 }, (err, stdout) => {
      try {
        resolve(err === null ? JSON.parse(stdout) as Member[] : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}
