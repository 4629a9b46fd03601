// The fence that lives with an exclusive container (src/executor/lease-file.ts): the lease file,
// the container's command wrapped by the fence, and the fence script itself, run for real as the
// first process of a fresh pid namespace (as in a container) (root; .ci/run installs busybox-static and util-linux).

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readUptimeMs } from '../../src/executor/clock.ts';
import { fencedSpec } from '../../src/executor/docker-container-config.ts';
import { containerLabels } from '../../src/executor/labels.ts';
import { FileLeaseStore, fenceMountPath, leaseFileOf } from '../../src/executor/lease-file.ts';
import { runtimeSettingsNone, type ContainerSpec } from '../../src/executor/runtime.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-lease-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function spec(command: string[] | null, args: string[] | null): ContainerSpec {
  return {
    name: 'shoal-db.1.t1', image: 'busybox:local', command, args, env: {}, user: null,
    labels: containerLabels({ clusterId: 'c', nodeId: 'n1', service: 'db', slot: 1, taskId: 't1', specVersion: 1, term: 1, nodeEpoch: 4 }, true),
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1, maxFiles: 1 },
  };
}

const uptimeMs = (): number => readUptimeMs(readFileSync('/proc/uptime', 'utf8'));

describe('the exclusive-task fence', () => {
  it('reads /proc/uptime as boot-clock ms', () => {
    expect(readUptimeMs('12345.67 999.00\n')).toBe(12_345_670);
    expect(() => readUptimeMs('nonsense')).toThrow(/does not read as uptime/);
    expect(uptimeMs()).toBeGreaterThan(0);
  });

  it('wraps the command Docker would run, with the lease directory mounted read-only', () => {
    const f = fencedSpec(spec(['sleep'], ['60']), '/var/lib/shoal/lease', { entrypoint: null, cmd: null });
    expect(f.command).toEqual(['/bin/sh', `${fenceMountPath}/fence.sh`, `${fenceMountPath}/epoch-4`, 'sleep', '60']);
    expect(f.args).toEqual([]);
    expect(f.mounts).toContainEqual({ type: 'bind', source: '/var/lib/shoal/lease', target: fenceMountPath, readOnly: true });
    // The image's entrypoint and CMD when the spec sets neither; a command alone clears the image's CMD.
    expect(fencedSpec(spec(null, null), '/l', { entrypoint: ['/init'], cmd: ['serve'] }).command?.slice(3)).toEqual(['/init', 'serve']);
    expect(fencedSpec(spec(['run'], null), '/l', { entrypoint: null, cmd: ['ignored'] }).command?.slice(3)).toEqual(['run']);
    expect(() => fencedSpec(spec(null, null), '/l', { entrypoint: null, cmd: null })).toThrow(/neither the spec nor the image/);
  });

  it('keeps the lease per epoch, and believes only a file of this boot', () => {
    const store = new FileLeaseStore(dir);
    store.write(2, 123_450);
    expect(store.read(2)).toBe(123_450);
    expect(store.read(3)).toBeNull();
    writeFileSync(leaseFileOf(dir, 3), '999999 another-boot\n');
    expect(store.read(3)).toBeNull();
    expect(existsSync(path.join(dir, 'fence.sh'))).toBe(true);
  });

  // unshare (util-linux) and busybox-static are installed by .ci/run; root is needed, as for every namespace test.
  it('kills the task once the lease runs out, and leaves it alone while the lease holds', async () => {
    const store = new FileLeaseStore(dir);
    store.write(7, uptimeMs() + 60_000);
    store.write(8, uptimeMs() + 800);
    const runFence = (epoch: number, waitMs: number): Promise<number | null> => new Promise((resolve) => {
      const p = spawn('unshare', ['--pid', '--fork', '--kill-child', '/bin/busybox', 'sh', path.join(dir, 'fence.sh'), leaseFileOf(dir, epoch), '/bin/busybox', 'sleep', '30'], { stdio: 'ignore' });
      const t = setTimeout(() => { p.kill('SIGKILL'); resolve(null); }, waitMs);
      p.on('exit', (code) => { clearTimeout(t); resolve(code); });
    });
    const [held, expired] = await Promise.all([runFence(7, 3_000), runFence(8, 10_000)]);
    expect(held).toBeNull();
    expect(expired).toBe(137);
  }, 20_000);
});
