import { describe, expect, it } from 'vitest';
import { containerInspectSchema, dockerEventSchema, dockerTimeMs, toContainerInfo, toRuntimeEvent } from '../../src/executor/docker-answers.ts';

const zero = '0001-01-01T00:00:00Z';

function inspect(state: Record<string, unknown>, labels: Record<string, string> | null = { a: '1' }) {
  return containerInspectSchema.parse({
    Id: 'c1', Name: '/shoal-web.1.t1', Config: { Image: 'busybox:1.36', Labels: labels, Env: ['ignored=1'] },
    State: { Status: 'running', ExitCode: 0, StartedAt: zero, FinishedAt: zero, ...state }, HostConfig: {},
  });
}

function event(Action: string, Attributes: Record<string, string> = {}, extra: Record<string, unknown> = {}) {
  return dockerEventSchema.parse({ Type: 'container', Action, Actor: { ID: 'c1', Attributes: { name: 'n', image: 'i', 'shoal.task': 't1', ...Attributes } }, timeNano: Number('1700000000123456789') /* as JSON.parse reads it */, ...extra });
}

describe('dockerTimeMs', () => {
  it('reads nanosecond RFC 3339 times as ms, and the zero time as null', () => {
    expect(dockerTimeMs('2024-05-01T10:00:00.123456789Z')).toBe(Date.UTC(2024, 4, 1, 10, 0, 0, 123));
    expect(dockerTimeMs(zero)).toBeNull();
    expect(dockerTimeMs('')).toBeNull();
  });
});

describe('toContainerInfo', () => {
  it('maps a running container', () => {
    expect(toContainerInfo(inspect({ StartedAt: '2024-05-01T10:00:00Z', Health: { Status: 'healthy' } }))).toEqual({
      id: 'c1', name: 'shoal-web.1.t1', image: 'busybox:1.36', labels: { a: '1' }, state: 'running', exitCode: null,
      startedAt: Date.UTC(2024, 4, 1, 10), finishedAt: null, health: 'healthy', error: null,
    });
  });

  it('gives the exit code only once exited, and the OOM kill and start error as the error', () => {
    const i = toContainerInfo(inspect({ Status: 'exited', ExitCode: 137, OOMKilled: true, Error: 'boom' }, null));
    expect(i).toMatchObject({ state: 'exited', exitCode: 137, labels: {} });
    expect(i.error).toMatch(/OOM.*; boom/);
    expect(toContainerInfo(inspect({ Status: 'created', ExitCode: 0 })).exitCode).toBeNull();
  });

  it('maps removing to dead, and a health status of none to null', () => {
    expect(toContainerInfo(inspect({ Status: 'removing' })).state).toBe('dead');
    expect(toContainerInfo(inspect({ Health: { Status: 'none' } })).health).toBeNull();
  });

  it('refuses an answer without the fields it reads', () => {
    expect(containerInspectSchema.safeParse({ Id: 'x', Name: '/x', Config: {}, State: {} }).success).toBe(false);
  });
});

describe('toRuntimeEvent', () => {
  it('maps create, start, destroy and oom with the labels and wall ms', () => {
    for (const type of ['create', 'start', 'destroy', 'oom'] as const) {
      expect(toRuntimeEvent(event(type))).toEqual({ type, containerId: 'c1', labels: { 'shoal.task': 't1' }, at: 1_700_000_000_123 });
    }
  });

  it('carries the exit code of die, and the verdict of health_status', () => {
    expect(toRuntimeEvent(event('die', { exitCode: '143' }))).toMatchObject({ type: 'die', exitCode: 143 });
    expect(toRuntimeEvent(event('health_status: unhealthy'))).toMatchObject({ type: 'health', health: 'unhealthy' });
    expect(toRuntimeEvent(event('health_status: healthy'))).toMatchObject({ type: 'health', health: 'healthy' });
  });

  it('falls back to seconds when there is no timeNano', () => {
    const e = dockerEventSchema.parse({ Type: 'container', Action: 'start', Actor: { ID: 'c1' }, time: 1_700_000_000 });
    expect(toRuntimeEvent(e)).toMatchObject({ at: 1_700_000_000_000, labels: {} });
  });

  it('drops actions and types the port does not carry', () => {
    expect(toRuntimeEvent(event('exec_start: true'))).toBeUndefined();
    expect(toRuntimeEvent(event('kill', { signal: '15' }))).toBeUndefined();
    expect(toRuntimeEvent(event('health_status: bogus'))).toBeUndefined();
    expect(toRuntimeEvent(event('start', {}, { Type: 'image' }))).toBeUndefined();
  });
});
