// A replicated volume's hooks (issue 41, docs/volumes.md, "Hooks"): a command the writer's node
// runs in the task's container (Docker exec, argv, no shell) before each snapshot and after it,
// for application-consistent copies (`sqlite3 /data/app.db '.backup /data/app.bak'`). A hook
// that exits non-zero, times out or finds no running container fails the pass with
// volume_hook_failed, naming the hook, its exit code and its stderr's tail; the writer records
// it as the volume's last error (the leader's volume.copy_failed event).

import { ShoalError } from '../../errors.ts';
import { labelKeys, ownerLabels, type Owner } from '../labels.ts';
import { RuntimeError, type Runtime } from '../runtime.ts';

export type HookPhase = 'before' | 'after';

/** Runs one hook of the volume's service's task on this node; throws volume_hook_failed. */
export type HookRunner = (service: string, phase: HookPhase, argv: readonly string[], timeoutMs: number) => Promise<void>;

/** The stderr kept in a hook's error message. */
const stderrTailChars = 400;

/** The hooks run through the node's runtime, in the running container of the service's task here. */
export function runtimeHooks(runtime: Pick<Runtime, 'list' | 'exec'>, owner: Owner): HookRunner {
  return async (service, phase, argv, timeoutMs) => {
    const what = `the ${phase} hook ${JSON.stringify(argv)} of service ${service}`;
    const fail = (message: string, details: Record<string, unknown> = {}): never => {
      throw new ShoalError('volume_hook_failed', `${what} ${message}; no version was sent this round`, { service, phase, argv: [...argv], ...details });
    };
    if (runtime.exec === undefined) fail('cannot run: this node\'s runtime runs no commands in containers');
    const running = (await runtime.list({ ...ownerLabels(owner), [labelKeys.service]: service })).filter((c) => c.state === 'running');
    const container = running[0];
    if (container === undefined) return fail('found no running container of the task on this node');
    let result;
    try {
      result = await (runtime.exec as NonNullable<Runtime['exec']>)(container.id, argv, timeoutMs);
    } catch (err) {
      if (err instanceof RuntimeError && err.kind === 'timeout') return fail(`did not end within ${timeoutMs} ms (replicate.hooks.timeout)`, { timeoutMs });
      return fail(`could not run: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (result.exitCode !== 0) {
      const tail = result.stderr.trim().slice(-stderrTailChars);
      fail(`exited ${result.exitCode}${tail === '' ? ' (no stderr)' : `: ${tail}`}`, { exitCode: result.exitCode, stderr: tail });
    }
  };
}
