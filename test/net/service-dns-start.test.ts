// How a node starts its service DNS responder: the config switch (on by default), and the query
// counter every node exports, running or not.

import { describe, expect, it } from 'vitest';
import { DocumentStore } from '../../fsm/index.ts';
import { silentLogger } from '../../src/log.ts';
import { configSchema } from '../../src/server/config.ts';
import { Registry } from '../../src/base/metrics.ts';
import { startServiceDns } from '../../net/dns-start.ts';

const base = { dataDir: '/tmp/x', api: { listen: '127.0.0.1:7101' }, peer: { listen: '127.0.0.1:7001' } };

describe('service DNS start', () => {
  it('is on by default and can be switched off', () => {
    expect(configSchema.parse(base).dns).toEqual({ enabled: true });
    expect(configSchema.parse({ ...base, dns: { enabled: false } }).dns).toEqual({ enabled: false });
    expect(configSchema.safeParse({ ...base, dns: { enabled: true, port: 5353 } }).success).toBe(false);
  });

  it('exports shoal_dns_queries_total at 0 for every result whether the responder runs or not', async () => {
    for (const enabled of [false, true]) {
      const metrics = new Registry();
      const dns = startServiceDns({ enabled, store: new DocumentStore(), nodeId: 'n1', metrics, log: silentLogger });
      expect(dns === null).toBe(!enabled);
      const text = await metrics.render();
      expect(text).toContain('# TYPE shoal_dns_queries_total counter');
      expect(text).toContain('shoal_dns_queries_total{result="forwarded"} 0');
      await dns?.close();
    }
  });
});
