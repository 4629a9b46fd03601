// The one command runner (src/base/run-command.ts), on real programs: exit statuses, stdin, the
// environment, the timeout (which kills what the program started too), the output limits, and
// the typed error of each way a command fails.

import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AssertionError } from '../../src/base/assert.ts';
import { CommandError, commandLine, pipesAfterKillMs, runCommand } from '../../src/base/run-command.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-run-command-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const failureOf = async (p: Promise<unknown>): Promise<CommandError> => {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(CommandError);
  return err as CommandError;
};

/** Running: present and not a zombie (where no init reaps orphans, a killed one stays listed). */
const running = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

describe('runCommand', () => {
  it('resolves what a program printed when it exits 0', async () => {
    expect(await runCommand('true', [], { timeoutMs: 5000 })).toEqual({ stdout: '', stderr: '', stderrBytesDropped: 0, exitCode: 0 });
    expect((await runCommand('echo', ['a b', '$HOME; rm -rf /'], { timeoutMs: 5000 })).stdout).toBe('a b $HOME; rm -rf /\n');
  });

  it('fails typed on a non-zero exit, with the stderr tail, or returns it when asked', async () => {
    const f = await failureOf(runCommand('false', [], { timeoutMs: 5000 }));
    expect(f).toMatchObject({ command: 'false', args: [], reason: 'exit', exitCode: 1, signal: null, timedOut: false });
    expect(f.message).toBe('false exited with code 1');
    const g = await failureOf(runCommand('sh', ['-c', 'echo oops >&2; exit 3'], { timeoutMs: 5000 }));
    expect(g).toMatchObject({ reason: 'exit', exitCode: 3, stderrTail: 'oops\n' });
    expect(g.message).toBe('sh -c "echo oops >&2; exit 3" exited with code 3: oops');
    expect(await runCommand('sh', ['-c', 'echo out; echo err >&2; exit 1'], { timeoutMs: 5000, nonZeroExit: 'return' }))
      .toEqual({ stdout: 'out\n', stderr: 'err\n', stderrBytesDropped: 0, exitCode: 1 });
  });

  it('writes the input to stdin, and runs with the environment and working directory given', async () => {
    expect((await runCommand('cat', [], { timeoutMs: 5000, input: 'hello' })).stdout).toBe('hello');
    expect((await runCommand('cat', [], { timeoutMs: 5000, input: Buffer.from('bytes') })).stdout).toBe('bytes');
    // A program that does not read its stdin is not failed by the broken pipe.
    expect((await runCommand('true', [], { timeoutMs: 5000, input: 'x'.repeat(1 << 20) })).exitCode).toBe(0);
    const env = { PATH: process.env.PATH, SHOAL_RUN_TEST: 'yes' };
    expect((await runCommand('sh', ['-c', 'echo "$SHOAL_RUN_TEST:$HOME"'], { timeoutMs: 5000, env })).stdout).toBe('yes:\n');
    expect((await runCommand('pwd', [], { timeoutMs: 5000, cwd: dir })).stdout.trim()).toBe(realpathSync(dir));
  });

  it('kills a program past its timeout, with what it started, and says so', async () => {
    const pidFile = path.join(dir, 'sleeper.pid');
    const started = Date.now();
    const f = await failureOf(runCommand('sh', ['-c', `sleep 30 & echo $! > ${pidFile}; echo waiting >&2; wait`], { timeoutMs: 300 }));
    expect(Date.now() - started).toBeLessThan(3000);
    expect(f).toMatchObject({ reason: 'timeout', timedOut: true, exitCode: null, stderrTail: 'waiting\n' });
    expect(f.message).toContain('did not finish within 300 ms and was killed: waiting');
    const sleeper = Number(readFileSync(pidFile, 'utf8'));
    await new Promise((r) => setTimeout(r, 100));
    expect(running(sleeper)).toBe(false);
    expect((await failureOf(runCommand('sh', ['-c', 'sleep 5'], { timeoutMs: 100 }))).reason).toBe('timeout');
  });

  it('settles past the timeout even when a program that left its group holds the pipes', async () => {
    const started = Date.now();
    const f = await failureOf(runCommand('sh', ['-c', 'setsid sleep 4 & wait'], { timeoutMs: 200 }));
    expect(f.reason).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(200 + pipesAfterKillMs + 1500);
  });

  it('kills a program that prints more than stdoutBytesMax, naming the limit', async () => {
    const f = await failureOf(runCommand('head', ['-c', '10000000', '/dev/zero'], { timeoutMs: 5000, stdoutBytesMax: 1000 }));
    expect(f).toMatchObject({ reason: 'output_limit', timedOut: false });
    expect(f.message).toBe('head -c 10000000 /dev/zero printed more than 1000 bytes (stdoutBytesMax) on stdout and was killed');
    expect((await runCommand('head', ['-c', '1000', '/dev/zero'], { timeoutMs: 5000, stdoutBytesMax: 1000 })).stdout).toHaveLength(1000);
  });

  it('keeps the last stderrBytesMax bytes of stderr and counts what it dropped', async () => {
    const r = await runCommand('sh', ['-c', 'head -c 5000 /dev/zero | tr "\\0" a >&2; echo END >&2'], { timeoutMs: 5000, stderrBytesMax: 100 });
    expect(r.stderr).toHaveLength(100);
    expect(r.stderr.endsWith('aaaEND\n')).toBe(true);
    expect(r.stderrBytesDropped).toBe(5004 - 100);
  });

  it('names a program that is not installed, and one that cannot start', async () => {
    const f = await failureOf(runCommand('no-such-program-shoal', ['x'], { timeoutMs: 5000 }));
    expect(f).toMatchObject({ command: 'no-such-program-shoal', args: ['x'], reason: 'not_found', exitCode: null });
    expect(f.message).toBe('no-such-program-shoal is not installed (not found on PATH)');
    const g = await failureOf(runCommand('true', [], { timeoutMs: 5000, cwd: path.join(dir, 'absent') }));
    expect(g.reason).toBe('spawn_failed');
    expect(g.message).toContain(`the working directory ${path.join(dir, 'absent')} does not exist`);
    expect((await failureOf(runCommand('echo', ['a\0b'], { timeoutMs: 5000 }))).reason).toBe('spawn_failed');
    writeFileSync(path.join(dir, 'plain'), 'echo\n', { mode: 0o644 });
    const notExecutable = await failureOf(runCommand(path.join(dir, 'plain'), [], { timeoutMs: 5000, input: 'x' }));
    expect(notExecutable).toMatchObject({ reason: 'spawn_failed', detail: expect.stringContaining('EACCES') });
  });

  it('reports a program killed by a signal it was not sent by the runner', async () => {
    const f = await failureOf(runCommand('sh', ['-c', 'kill -TERM $$'], { timeoutMs: 5000 }));
    expect(f).toMatchObject({ reason: 'signal', signal: 'SIGTERM', exitCode: null, timedOut: false });
  });

  it('refuses a call without a positive timeout or output limit (a programmer error)', () => {
    expect(() => runCommand('true', [], { timeoutMs: 0 })).toThrow(AssertionError);
    expect(() => runCommand('true', [], { timeoutMs: Number.NaN })).toThrow(AssertionError);
    expect(() => runCommand('true', [], { timeoutMs: 10, stdoutBytesMax: 0 })).toThrow(AssertionError);
  });
});

describe('commandLine', () => {
  it('quotes only the arguments that need it', () => {
    expect(commandLine('ip', ['-j', 'addr', 'show', 'dev', 'wg0'])).toBe('ip -j addr show dev wg0');
    expect(commandLine('nft', ['add', 'element', 'inet', 't', 's', '{ 7102 timeout 4s }'])).toBe('nft add element inet t s "{ 7102 timeout 4s }"');
  });
});
