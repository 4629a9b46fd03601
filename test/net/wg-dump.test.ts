import { describe, expect, it } from 'vitest';
import { parseWgDump } from '../../net/wg-dump.ts';

const priv = 'UNeArZ3HjT1P1cmgAHtl5SvJ9CN4ExoEJJbLmrqVGU8=';
const pub = 'QM/akMbHfBjOZtii8svoi73ouWVWHCZTeCTSREw+7mg=';
const peerA = 'EYJZOglPgjTGAOQYcNXxlVLnIOzJRnPa+H2ui7ALDHo=';
const peerB = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';

const line = (...f: string[]): string => f.join('\t');

describe('parseWgDump', () => {
  it('reads the interface and its peers, a peer without handshake included', () => {
    const text = [
      line(priv, pub, '51820', 'off'),
      line(peerA, '(none)', '10.213.1.2:51820', '10.212.0.2/32', '1764622000', '1480', '2960', '25'),
      line(peerB, '(none)', '(none)', '10.212.0.3/32,10.212.9.0/24', '0', '0', '148', 'off'),
      '',
    ].join('\n');
    const d = parseWgDump(text);
    expect(d).toEqual({
      publicKey: pub, listenPort: 51820, fwmark: null,
      peers: [
        { publicKey: peerA, hasPresharedKey: false, endpoint: '10.213.1.2:51820', allowedIps: ['10.212.0.2/32'], latestHandshakeSec: 1764622000, rxBytes: 1480, txBytes: 2960, persistentKeepaliveSec: 25 },
        { publicKey: peerB, hasPresharedKey: false, endpoint: null, allowedIps: ['10.212.0.3/32', '10.212.9.0/24'], latestHandshakeSec: null, rxBytes: 0, txBytes: 148, persistentKeepaliveSec: null },
      ],
    });
    // The private key is checked and dropped, never returned.
    expect(JSON.stringify(d)).not.toContain(priv);
  });

  it('reads an interface with no key, no peers and a fwmark', () => {
    expect(parseWgDump(line('(none)', '(none)', '0', '0x1234') + '\n')).toEqual({ publicKey: null, listenPort: 0, fwmark: 0x1234, peers: [] });
  });

  it('reads an IPv6 endpoint and a preshared key', () => {
    const d = parseWgDump([line(priv, pub, '51820', 'off'), line(peerA, peerB, '[fd00::2]:51820', '(none)', '0', '0', '0', 'off')].join('\n'));
    expect(d.peers[0]).toMatchObject({ endpoint: '[fd00::2]:51820', hasPresharedKey: true, allowedIps: [] });
  });

  it.each([
    ['empty output', ''],
    ['free text instead of a dump', 'interface: wg0\n  public key: abc\n'],
    ['a short interface line', line(priv, pub, '51820')],
    ['a bad listen port', line(priv, pub, '70000', 'off')],
    ['a peer with 7 fields', [line(priv, pub, '1', 'off'), line(peerA, '(none)', '(none)', '(none)', '0', '0', '0')].join('\n')],
    ['a peer with a bad key', [line(priv, pub, '1', 'off'), line('nokey', '(none)', '(none)', '(none)', '0', '0', '0', 'off')].join('\n')],
    ['a negative counter', [line(priv, pub, '1', 'off'), line(peerA, '(none)', '(none)', '(none)', '0', '-1', '0', 'off')].join('\n')],
    ['a counter with a sign', [line(priv, pub, '1', 'off'), line(peerA, '(none)', '(none)', '(none)', '+5', '0', '0', 'off')].join('\n')],
    ['a bad endpoint', [line(priv, pub, '1', 'off'), line(peerA, '(none)', 'host', '(none)', '0', '0', '0', 'off')].join('\n')],
    ['a bad allowed IP', [line(priv, pub, '1', 'off'), line(peerA, '(none)', '(none)', '10.0.0.1', '0', '0', '0', 'off')].join('\n')],
    ['a keepalive above 65535', [line(priv, pub, '1', 'off'), line(peerA, '(none)', '(none)', '(none)', '0', '0', '0', '70000')].join('\n')],
  ])('refuses %s with net_tool_failed', (_what, text) => {
    expect(() => parseWgDump(text)).toThrow(expect.objectContaining({ code: 'net_tool_failed' }));
  });
});
