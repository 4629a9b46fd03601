// Reading `conntrack -L` and choosing the flows a removed permission allowed (net/conntrack.ts).
// The lines are conntrack 1.4.7's, as printed on this machine (IPv4, IPv6, UDP, ICMP, flags).

import { describe, expect, it } from 'vitest';
import { deleteArgs, flowsToEnd, parseFlowLine, parseFlows } from '../../net/conntrack.ts';

const listing = [
  'tcp      6 431999 ESTABLISHED src=10.30.1.2 dst=10.30.2.3 sport=40112 dport=5432 src=10.30.2.3 dst=10.30.1.2 sport=5432 dport=40112 [ASSURED] mark=0 use=1',
  'tcp      6 99 ESTABLISHED src=fd00::1 dst=fd00::2 sport=1234 dport=80 [UNREPLIED] src=fd00::2 dst=fd00::1 sport=80 dport=1234 mark=0 use=1',
  'udp      17 29 src=10.30.1.2 dst=10.30.2.3 sport=5353 dport=53 [UNREPLIED] src=10.30.2.3 dst=10.30.1.2 sport=53 dport=5353 mark=0 use=1',
  // A published port: the client reached the host, Docker's DNAT sent it to the task 10.30.2.9:80.
  'tcp      6 117 TIME_WAIT src=192.168.1.50 dst=192.168.1.10 sport=51000 dport=8080 src=10.30.2.9 dst=192.168.1.50 sport=80 dport=51000 [ASSURED] mark=1 use=1',
  'icmp     1 29 src=10.30.1.2 dst=10.30.2.3 type=8 code=0 id=7 src=10.30.2.3 dst=10.30.1.2 type=0 code=0 id=7 mark=0 use=1',
  '',
].join('\n');

describe('conntrack -L', () => {
  it('reads each TCP and UDP flow with its original and reply tuples; skips flows without ports', () => {
    const flows = parseFlows(listing);
    expect(flows).toHaveLength(4);
    expect(flows[0]).toEqual({
      protocol: 'tcp',
      original: { src: '10.30.1.2', dst: '10.30.2.3', sport: 40112, dport: 5432 },
      reply: { src: '10.30.2.3', dst: '10.30.1.2', sport: 5432, dport: 40112 },
    });
    expect(flows[1]?.original).toEqual({ src: 'fd00::1', dst: 'fd00::2', sport: 1234, dport: 80 });
    expect(flows[3]?.reply).toEqual({ src: '10.30.2.9', dst: '192.168.1.50', sport: 80, dport: 51000 });
    expect(parseFlowLine('conntrack v1.4.7 (conntrack-tools): 5 flow entries have been shown.')).toBeNull();
    expect(parseFlowLine('tcp 6 10 src=1.2.3.4 dst=5.6.7.8 sport=x dport=1 src=5.6.7.8 dst=1.2.3.4 sport=1 dport=2')).toBeNull();
  });

  it('chooses the flows a removed permission or published port allowed, and deletes each by its exact tuple', () => {
    const flows = parseFlows(listing);
    const ended = flowsToEnd(flows,
      [{ from: '10.30.1.2', to: '10.30.2.3', protocol: 'tcp', port: 5432 }, { from: '10.30.1.2', to: '10.30.2.3', protocol: 'tcp', port: 53 }],
      [{ address: '10.30.2.9', protocol: 'tcp', port: 80 }]);
    // Not the UDP flow to port 53: the permission removed was TCP.
    expect(ended.map((f) => f.original.dport)).toEqual([5432, 8080]);
    expect(ended.map(deleteArgs)).toEqual([
      ['-D', '-p', 'tcp', '-s', '10.30.1.2', '-d', '10.30.2.3', '--sport', '40112', '--dport', '5432'],
      ['-D', '-p', 'tcp', '-s', '192.168.1.50', '-d', '192.168.1.10', '--sport', '51000', '--dport', '8080'],
    ]);
    expect(flowsToEnd(flows, [], [])).toEqual([]);
  });
});
