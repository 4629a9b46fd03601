// The drill's isolate action drives `nft` through the command runner. Here a stand-in `nft` on
// PATH records what it was asked (arguments and stdin) and fails when told to, so the commands and
// the errors are checked without root or nftables.

import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { healPorts, isolatePorts, nft } from '../../src/node/drill/drill-nft.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-drill-nft-'));
const log = path.join(dir, 'calls.log');
const savedPath = process.env.PATH;

/** An `nft` that logs `args | stdin` per call; `list` fails (no table yet), and `add` fails when FAIL_ADD is set. */
const fakeNft = `#!/bin/sh
input=$(cat)
printf '%s | %s\\n' "$*" "$input" >> "${log}"
case "$1 $2" in
  "-j list") echo "Error: No such file or directory" >&2; exit 1 ;;
  "add element") if [ -n "$FAIL_ADD" ]; then echo "Error: Operation not permitted" >&2; exit 1; fi ;;
esac
exit 0
`;

beforeEach(() => {
  writeFileSync(path.join(dir, 'nft'), fakeNft);
  chmodSync(path.join(dir, 'nft'), 0o755);
  rmSync(log, { force: true });
  process.env.PATH = `${dir}:${savedPath ?? ''}`;
});
afterEach(() => {
  process.env.PATH = savedPath;
  delete process.env.FAIL_ADD;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));


describe('isolatePorts and healPorts', () => {
  it('make the table when it is absent, then add the ports with their timeout; heal deletes them', async () => {
    await isolatePorts([7102, 7202], 4);
    const made = readFileSync(log, 'utf8');
    expect(made.startsWith('-j list table inet shoal_drill | \n-f - | table inet shoal_drill {\n  set isolated_ports { type inet_service; flags timeout; }\n')).toBe(true);
    expect(made.endsWith([
      '-f - | delete element inet shoal_drill isolated_ports { 7102 }',
      'delete element inet shoal_drill isolated_ports { 7202 }',
      'add element inet shoal_drill isolated_ports { 7102 timeout 4s, 7202 timeout 4s } | ',
      '',
    ].join('\n'))).toBe(true);
    rmSync(log);
    await healPorts([7102]);
    expect(readFileSync(log, 'utf8')).toBe('delete element inet shoal_drill isolated_ports { 7102 } | \n');
  });

  it('fail with drill_action_failed naming the nft command and its stderr', async () => {
    process.env.FAIL_ADD = '1';
    const err = await isolatePorts([7102], 4).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'drill_action_failed', details: { command: 'nft', reason: 'exit' } });
    expect((err as Error).message).toBe('nft add element inet shoal_drill isolated_ports "{ 7102 timeout 4s }" exited with code 1: Error: Operation not permitted (isolate needs root, or CAP_NET_ADMIN); nothing was changed');
  });
});

describe('nft', () => {
  it('says how to install nftables when there is no nft', async () => {
    process.env.PATH = dir;
    rmSync(path.join(dir, 'nft'));
    const err = await nft(['list', 'ruleset']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'drill_action_failed', details: { reason: 'not_found' } });
    expect((err as Error).message).toContain('the nft command is not installed on this node (apt-get install nftables)');
  });
});
