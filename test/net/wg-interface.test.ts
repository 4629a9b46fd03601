import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { renderWgConfig, WgInterface } from '../../net/wg.ts';
import type { ToolRunner } from '../../net/wg-command.ts';
import { runTool } from '../../net/wg-command.ts';

const priv = 'UNeArZ3HjT1P1cmgAHtl5SvJ9CN4ExoEJJbLmrqVGU8=';
const peer = 'EYJZOglPgjTGAOQYcNXxlVLnIOzJRnPa+H2ui7ALDHo=';

/** A runner that records calls and answers from a script of handlers. */
function fakeRunner(answer: (cmd: string, args: readonly string[]) => string): { run: ToolRunner; calls: string[] } {
  const calls: string[] = [];
  const run: ToolRunner = async (cmd, args) => {
    calls.push([cmd, ...args].join(' '));
    return answer(cmd, args);
  };
  return { run, calls };
}

const missing = (): never => { throw new ShoalError('net_tool_failed', 'ip failed', { stderr: 'Device "wgx" does not exist.' }); };

describe('WgInterface', () => {
  it('adopts an interface that exists, creating nothing', async () => {
    const { run, calls } = fakeRunner(() => '[{"ifname":"wgx","mtu":1420,"flags":["POINTOPOINT","UP"]}]');
    let launched = false;
    const wg = new WgInterface('wgx', run, async () => { launched = true; });
    expect(await wg.ensure()).toBe('adopted');
    expect(calls).toEqual(['ip -j link show dev wgx']);
    expect(launched).toBe(false);
  });

  it('falls back to wireguard-go when the kernel has no WireGuard', async () => {
    let exists = false;
    const { run } = fakeRunner((cmd, args) => {
      if (args.includes('add')) throw new ShoalError('net_tool_failed', 'ip failed', { stderr: 'Error: Unknown device type.' });
      if (!exists) missing();
      return '[{"ifname":"wgx","mtu":1420,"flags":[]}]';
    });
    const wg = new WgInterface('wgx', run, async (name) => { expect(name).toBe('wgx'); exists = true; });
    expect(await wg.ensure()).toBe('wireguard-go');
  });

  it('uses the kernel module where it is present', async () => {
    const { run, calls } = fakeRunner((_cmd, args) => { if (args.includes('show')) missing(); return ''; });
    expect(await new WgInterface('wgx', run, async () => { throw new Error('not this'); }).ensure()).toBe('kernel');
    expect(calls).toContain('ip link add dev wgx type wireguard');
  });

  it('refuses a bad interface name', () => {
    expect(() => new WgInterface('wg0; rm -rf /')).toThrow(expect.objectContaining({ code: 'config_invalid' }));
    expect(() => new WgInterface('a-name-far-too-long')).toThrow(expect.objectContaining({ code: 'config_invalid' }));
  });

  it('renders a config with every value checked', () => {
    expect(renderWgConfig({ privateKey: priv, listenPort: 51820, peers: [{ publicKey: peer, endpoint: '10.0.0.2:51820', allowedIps: ['10.212.0.2/32'], persistentKeepaliveSec: 25 }] }))
      .toBe(`[Interface]\nPrivateKey = ${priv}\nListenPort = 51820\n\n[Peer]\nPublicKey = ${peer}\nEndpoint = 10.0.0.2:51820\nAllowedIPs = 10.212.0.2/32\nPersistentKeepalive = 25\n`);
    const bad = (p: Partial<{ publicKey: string; endpoint: string; allowedIps: string[] }>): unknown =>
      renderWgConfig({ privateKey: priv, listenPort: 1, peers: [{ publicKey: peer, endpoint: '10.0.0.2:1', allowedIps: [], persistentKeepaliveSec: null, ...p }] });
    expect(() => bad({ endpoint: '10.0.0.2:1\nPrivateKey = x' })).toThrow(expect.objectContaining({ code: 'bad_request' }));
    expect(() => bad({ publicKey: 'x' })).toThrow(expect.objectContaining({ code: 'bad_request' }));
    expect(() => bad({ allowedIps: ['0.0.0.0/0\n[Peer]'] })).toThrow(expect.objectContaining({ code: 'bad_request' }));
  });
});

describe('runTool', () => {
  it('resolves stdout, passes stdin, and fails typed with the stderr', async () => {
    expect(await runTool('cat', [], { input: 'hello' })).toBe('hello');
    await expect(runTool('sh', ['-c', 'echo oops >&2; exit 3'])).rejects.toMatchObject({ code: 'net_tool_failed', message: expect.stringContaining('oops') });
    await expect(runTool('no-such-tool-shoal', [])).rejects.toMatchObject({ code: 'net_tool_failed', details: { missing: true } });
    await expect(runTool('sleep', ['5'], { timeoutMs: 50 })).rejects.toMatchObject({ code: 'net_tool_failed', message: expect.stringContaining('within 50 ms') });
  });
});
