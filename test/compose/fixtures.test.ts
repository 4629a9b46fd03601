// Real compose files of well-known self-hosted applications (test/fixtures/compose/), each either
// fully honoured (its services, and the fields accepted with a warning) or refused with every
// problem named by its path. The expected outcome of each is written here.

import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileStack, loadCompose } from '../../src/resources/compose/index.ts';
import { Problems, type Problem } from '../../src/resources/spec/reader.ts';
import { isShoalError } from '../../src/errors.ts';

const dir = new URL('../fixtures/compose/', import.meta.url).pathname;

type Expected = { services: number; warnings: string[] } | { refused: string[] };

const expected: Record<string, Expected> = {
  'adguard.yaml': { services: 1, warnings: [] },
  'freshrss.yaml': { refused: ['services.freshrss.environmnet'] },
  'gitea.yaml': { refused: ['services.server.volumes[0]', 'services.db.volumes[0]'] },
  'home-assistant.yaml': { services: 1, warnings: ['services.homeassistant.container_name'] },
  'homepage.yaml': { services: 1, warnings: ['services.homepage.stdin_open', 'services.homepage.tty'] },
  'immich.yaml': { refused: ['services.immich-server.volumes[0]', 'services.immich-server.healthcheck.test', 'services.database.volumes[0]'] },
  'jellyfin.yaml': { services: 1, warnings: [] },
  'minio.yaml': { refused: ['services.minio.build'] },
  'monitoring-cluster.yaml': { services: 3, warnings: [] },
  'monitoring.yaml': { refused: ['services.prometheus.volumes[0]', 'services.node-exporter.pid', 'services.node-exporter.volumes[0]'] },
  'mosquitto.yaml': { services: 2, warnings: [] },
  'nextcloud.yaml': { refused: ['services.app.links'] },
  'nginx-proxy-manager.yaml': { refused: ['services.app.volumes[0]', 'services.app.volumes[1]'] },
  'paperless.yaml': { refused: ['services.webserver.volumes[2]', 'services.webserver.volumes[3]'] },
  'pihole-cluster.yaml': { services: 1, warnings: [] },
  'pihole.yaml': { refused: ['services.pihole.volumes[0]', 'services.pihole.volumes[1]'] },
  'plex.yaml': { services: 1, warnings: ['services.plex.container_name'] },
  'portainer.yaml': { services: 1, warnings: [] },
  'postgres-secret.yaml': { services: 1, warnings: [] },
  'postgres.yaml': { services: 1, warnings: [] },
  'syncthing.yaml': { services: 1, warnings: ['services.syncthing.container_name'] },
  'traefik.yaml': { services: 2, warnings: [] },
  'uptime-kuma.yaml': { services: 1, warnings: ['services.uptime-kuma.container_name'] },
  'vaultwarden.yaml': { services: 1, warnings: [] },
  'wireguard.yaml': { services: 1, warnings: ['services.wireguard.container_name'] },
  'wordpress.yaml': { services: 2, warnings: ['services.db.expose'] },
};

const env: Record<string, string> = { GRAFANA_ADMIN_PASSWORD: 'admin' };

function compile(file: string) {
  const problems = new Problems();
  // Immich reads its variables from the .env its release ships beside the file.
  const dotEnv = file === 'immich.yaml' ? readFileSync(path.join(dir, 'immich.env'), 'utf8') : undefined;
  const loaded = loadCompose({ files: [{ path: file, text: readFileSync(path.join(dir, file), 'utf8') }], env, dotEnv }, problems);
  expect(problems.list).toEqual([]);
  return compileStack({
    stack: 'home', model: loaded.model, unset: loaded.unset, lookup: (n) => env[n], networks: new Map(),
    readFile: (p) => {
      try {
        return readFileSync(path.join(dir, p));
      } catch {
        return undefined;
      }
    },
  });
}

function refusedPaths(file: string): { paths: string[]; problems: Problem[] } {
  try {
    compile(file);
  } catch (err) {
    if (!isShoalError(err) || err.code !== 'bad_request') throw err;
    const problems = (err.details?.problems ?? []) as Problem[];
    return { paths: problems.map((p) => p.path), problems };
  }
  throw new Error(`${file} was not refused`);
}

describe('real compose files', () => {
  it('the collection has 20 or more files, and each has its expected outcome written here', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort();
    expect(files.length).toBeGreaterThanOrEqual(20);
    expect(files).toEqual(Object.keys(expected).sort());
  });

  for (const [file, want] of Object.entries(expected)) {
    it(`${file}: ${'refused' in want ? `refused (${want.refused.length} problems)` : 'honoured'}`, () => {
      if ('refused' in want) {
        const r = refusedPaths(file);
        expect(r.paths).toEqual(want.refused);
        // Every refusal says what to do instead, not only what is wrong.
        for (const p of r.problems) expect(p.message.length, p.path).toBeGreaterThan(30);
      } else {
        const c = compile(file);
        expect(c.set.services.length).toBe(want.services);
        expect(c.warnings.map((w) => w.path)).toEqual(want.warnings);
      }
    });
  }

  it('a relative bind mount names the three ways out', () => {
    const m = refusedPaths('nginx-proxy-manager.yaml').problems[0]?.message ?? '';
    expect(m).toContain('configs:');
    expect(m).toContain('named volume');
    expect(m).toContain('placement constraint');
  });

  it('the cluster version of the monitoring stack compiles to what it says', () => {
    const c = compile('monitoring-cluster.yaml');
    const prom = c.set.services.find((s) => s.name === 'home-prometheus');
    expect(prom?.secrets).toEqual([{ name: 'home-prometheus', target: 'prometheus.yml', mode: 0o400 }]);
    expect(prom?.constraints.map((x) => x.text)).toEqual(['node.labels.storage == ssd']);
    expect(prom?.resources).toEqual({ reservations: { cpuMillis: 250, memoryBytes: 512 * 1024 ** 2 }, limits: { cpuMillis: 1500, memoryBytes: 2 * 1024 ** 3 } });
    const exporter = c.set.services.find((s) => s.name === 'home-node-exporter');
    expect([exporter?.mode, exporter?.hostNetwork, exporter?.networks, exporter?.update.parallelism]).toEqual(['global', true, [], 2]);
    expect(c.secrets.map((s) => [s.name, Buffer.from(s.bytes).toString('utf8').split('\n')[0]])).toEqual([['home-grafana-admin', 'admin'], ['home-prometheus', 'global:']]);
    expect(c.dependsOn).toEqual({ 'home-grafana': { 'home-prometheus': 'service_started' } });
  });

  it('pi-hole for a cluster publishes DNS over UDP and TCP, with its capability and constraint', () => {
    const s = compile('pihole-cluster.yaml').set.services[0];
    expect(s?.ports).toEqual([{ published: 53, target: 53, protocol: 'tcp', mode: 'ingress' }, { published: 53, target: 53, protocol: 'udp', mode: 'ingress' }, { published: 8053, target: 80, protocol: 'tcp', mode: 'ingress' }]);
    expect([s?.capAdd, s?.restart.condition, s?.env.FTLCONF_webserver_api_password]).toEqual([['NET_ADMIN'], 'always', 'changeme']);
  });

  it('freshrss with its typo fixed compiles, its network alias on the stack\'s network', () => {
    const text = readFileSync(path.join(dir, 'freshrss.yaml'), 'utf8').replace('environmnet:', 'environment:');
    const problems = new Problems();
    const loaded = loadCompose({ files: [{ path: 'freshrss.yaml', text }], env, dotEnv: undefined }, problems);
    expect(problems.list).toEqual([]);
    const c = compileStack({ stack: 'home', model: loaded.model, unset: loaded.unset, lookup: (n) => env[n], networks: new Map(), readFile: () => undefined });
    const s = c.set.services[0];
    // Its published port goes through the routing mesh, so its tasks join `ingress` too.
    expect([s?.networks, s?.networkAliases]).toEqual([['home-backend', 'ingress'], { 'home-backend': ['rss'] }]);
  });
});
