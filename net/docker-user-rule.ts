// The one rule each of shoal's nftables tables keeps in Docker's DOCKER-USER chain (the firewall's,
// net/firewall.ts; the routing mesh's, net/ingress.ts): Docker's FORWARD policy is DROP and an
// accept in our table does not override a drop in another, so packets carrying the mark bit every
// accept of our chains sets are accepted there too. Each table has its own rule (its comment), so
// switching one off removes only its own.
//
// Without a DOCKER-USER chain (`iptables -S` exits non-zero) or without iptables at all there is
// no Docker (or its iptables integration is off) and nothing to do; iptables failing to run
// otherwise (a timeout, a signal) is an error.

import { CommandError } from '../src/base/run-command.ts';
import { runChecked, type CommandRunner } from './firewall-command.ts';
import { acceptMark } from './firewall-render.ts';

export const dockerUserChain = 'DOCKER-USER';

/** The rule's iptables arguments after the action (-C, -I, -D), told apart by `comment`. */
export function dockerUserRule(comment: string): string[] {
  const mark = `0x${acceptMark.toString(16)}`;
  return [dockerUserChain, '-m', 'mark', '--mark', `${mark}/${mark}`, '-m', 'comment', '--comment', comment, '-j', 'ACCEPT'];
}

/** Makes sure the rule is in DOCKER-USER; false when the host has no such chain (no Docker). */
export async function ensureDockerUserRule(run: CommandRunner, rule: readonly string[]): Promise<boolean> {
  const chain = await run('iptables', ['-w', '5', '-S', dockerUserChain]).catch((err: unknown) => {
    if (err instanceof CommandError && err.reason === 'not_found') return { code: 1 };
    throw err;
  });
  if (chain.code !== 0) return false;
  if ((await run('iptables', ['-w', '5', '-C', ...rule])).code === 0) return true;
  await runChecked(run, 'iptables', ['-w', '5', '-I', ...rule]);
  return true;
}

/** Deletes the rule, every copy of it (at most 10), until iptables finds none. */
export async function removeDockerUserRule(run: CommandRunner, rule: readonly string[]): Promise<void> {
  for (let i = 0; i < 10 && (await run('iptables', ['-w', '5', '-D', ...rule])).code === 0; i++) { /* until none is left */ }
}
