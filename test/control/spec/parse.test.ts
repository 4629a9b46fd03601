import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, parseSpecs, renderService, serviceSpecSchema, specLimits, type Problem, type ServiceSpec } from '../../../src/resources/spec/index.ts';

/** The problems of a refused input, as `path: message` lines. */
function refused(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    const e = err as ShoalError;
    expect(e.code).toBe('bad_request');
    const problems = (e.details?.problems ?? []) as Problem[];
    expect(e.message).toContain('nothing was applied');
    for (const p of problems) expect(e.message).toContain(`${p.path}: ${p.message}`);
    return problems.map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

const head = 'apiVersion: shoal/v1\nkind: Service\n';
const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });
const one = (fields: Record<string, unknown>): ServiceSpec => {
  const s = parseSpecObjects([svc(fields)]).services[0];
  if (s === undefined) throw new Error('none');
  return s;
};

describe('the smallest spec of the issue', () => {
  it('reads with every default filled in', () => {
    const { services } = parseSpecs(`${head}name: web\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 3\n`);
    const expected: ServiceSpec = {
      name: 'web', image: 'busybox:local', registryLogin: null, command: ['sleep', '3600'], args: null, env: {}, user: null, mode: 'replicated', replicas: 3,
      resources: { reservations: { cpuMillis: 0, memoryBytes: 0 }, limits: { cpuMillis: null, memoryBytes: null } },
      constraints: [], placement: { strategy: 'spread', spreadOver: null }, maxPerNode: null, ports: [], mounts: [], devices: [],
      capAdd: [], capDrop: [], privileged: false, hostNetwork: false, healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 10_000,
      logs: { maxSizeBytes: 10 * 1024 ** 2, maxFiles: 3 },
      restart: { condition: 'always', delayMs: 5000, maxDelayMs: 300_000, maxAttempts: null },
      update: { parallelism: 1, delayMs: 0, monitorMs: 5000, failureAction: 'pause', order: 'stop-first' },
      disruption: null, exclusive: false, secrets: [],
      networks: [], networkAliases: {}, networkAddresses: {},
      workingDir: null, hostname: null, init: false, readOnlyRootfs: false, shmSizeBytes: null, tmpfs: [], extraHosts: [], dns: [], dnsSearch: [],
      dnsOptions: [], ulimits: [], sysctls: {}, labels: {},
    };
    expect(services).toEqual([expected]);
    expect(serviceSpecSchema.parse(services[0])).toEqual(expected);
  });
});

describe('the whole vocabulary', () => {
  const full = `${head}name: zigbee2mqtt
image: ghcr.io/koenkk/zigbee2mqtt:1.40.2
command: ["node", "index.js"]
args: ["--verbose", ""]
env: {TZ: Europe/Paris, A_B: "1.10"}
user: "1000:1000"
replicas: 2
resources:
  reservations: {cpu: 250m, memory: 256Mi}
  limits: {cpu: "1.5", memory: 1Gi}
constraints: ["node.labels.radio == zigbee", "node.name in (n1, n2)"]
placement: {strategy: spread, spreadOver: node.labels.room}
maxPerNode: 1
ports:
  - {published: 8080, target: 8080}
  - {published: 8080, target: 8080, protocol: udp}
mounts:
  - {type: bind, source: /srv/z2m, target: /app/data}
  - {type: volume, source: z2m-cache, target: /cache, readOnly: true}
devices:
  - {hostPath: /dev/serial/by-id/usb-radio, containerPath: /dev/ttyACM0, permissions: mr}
  - {hostPath: /dev/ttyUSB1}
capAdd: [cap_net_admin, SYS_TIME]
capDrop: [MKNOD]
privileged: false
hostNetwork: true
healthCheck: {command: ["wget", "-q", "localhost:8080"], interval: 10s, timeout: 2s, retries: 5, startPeriod: 1m30s}
stopSignal: INT
stopGracePeriod: 30s
logs: {maxSize: 50M, maxFiles: 5}
restart: {condition: on-failure, delay: 10s, maxDelay: 2m, maxAttempts: 10}
update: {parallelism: 2, delay: 5s, monitor: 30s, failureAction: rollback, order: stop-first}
disruption: {maxUnavailable: 50%}
exclusive: true
secrets: [db-password, {name: tls-key, target: server.key, mode: '0440'}]
`;

  it('reads every field', () => {
    const [s] = parseSpecs(full).services;
    expect(s).toMatchObject({
      name: 'zigbee2mqtt', command: ['node', 'index.js'], args: ['--verbose', ''], env: { A_B: '1.10', TZ: 'Europe/Paris' }, user: '1000:1000',
      mode: 'replicated', replicas: 2,
      resources: { reservations: { cpuMillis: 250, memoryBytes: 256 * 1024 ** 2 }, limits: { cpuMillis: 1500, memoryBytes: 1024 ** 3 } },
      placement: { strategy: 'spread', spreadOver: 'room' }, maxPerNode: 1,
      ports: [{ published: 8080, target: 8080, protocol: 'tcp' }, { published: 8080, target: 8080, protocol: 'udp' }],
      mounts: [{ type: 'bind', source: '/srv/z2m', target: '/app/data', readOnly: false }, { type: 'volume', source: 'z2m-cache', target: '/cache', readOnly: true }],
      devices: [
        { hostPath: '/dev/serial/by-id/usb-radio', containerPath: '/dev/ttyACM0', permissions: 'rm' },
        { hostPath: '/dev/ttyUSB1', containerPath: '/dev/ttyUSB1', permissions: 'rwm' },
      ],
      capAdd: ['NET_ADMIN', 'SYS_TIME'], capDrop: ['MKNOD'], privileged: false, hostNetwork: true,
      healthCheck: { command: ['wget', '-q', 'localhost:8080'], intervalMs: 10_000, timeoutMs: 2000, retries: 5, startPeriodMs: 90_000 },
      stopSignal: 'SIGINT', stopGracePeriodMs: 30_000, logs: { maxSizeBytes: 50_000_000, maxFiles: 5 },
      restart: { condition: 'on-failure', delayMs: 10_000, maxDelayMs: 120_000, maxAttempts: 10 },
      update: { parallelism: 2, delayMs: 5000, monitorMs: 30_000, failureAction: 'rollback', order: 'stop-first' },
      disruption: { maxUnavailable: 50, unit: 'percent' },
      exclusive: true,
      secrets: [{ name: 'db-password', target: 'db-password', mode: 0o400 }, { name: 'tls-key', target: 'server.key', mode: 0o440 }],
      networks: [],
    });
    expect(Object.keys(s?.env ?? {})).toEqual(['A_B', 'TZ']);
    expect(s?.constraints.map((c) => c.text)).toEqual(['node.labels.radio == zigbee', 'node.name in (n1, n2)']);
    expect(serviceSpecSchema.safeParse(s).success).toBe(true);
  });

  it('reads the same from JSON', () => {
    expect(parseSpecs(JSON.stringify(parseYaml(full)), 'json')).toEqual(parseSpecs(full));
  });
});

describe('documents', () => {
  it('reads several YAML documents, skipping empty ones', () => {
    const text = `---\n${head}name: a\nimage: x\n---\n${head}name: b\nimage: x\nmode: global\n---\n`;
    const { services } = parseSpecs(text);
    expect(services.map((s) => [s.name, s.mode, s.replicas])).toEqual([['a', 'replicated', 1], ['b', 'global', null]]);
  });

  it('reads JSON: one document or a list', () => {
    expect(parseSpecs(JSON.stringify(svc({})), 'json').services).toHaveLength(1);
    expect(parseSpecs(JSON.stringify([svc({ name: 'a' }), svc({ name: 'b' })]), 'json').services.map((s) => s.name)).toEqual(['a', 'b']);
  });

  it('refuses an empty input', () => {
    expect(refused(() => parseSpecs('\n# nothing\n'))).toEqual(['documents: there are none; an apply names at least one resource']);
    expect(refused(() => parseSpecObjects([]))).toEqual(['documents: there are none; an apply names at least one resource']);
  });

  it('refuses more documents than the limit', () => {
    const many = Array.from({ length: specLimits.documentsMax + 1 }, (_, i) => svc({ name: `s${i}` }));
    expect(refused(() => parseSpecObjects(many))[0]).toContain(`at most ${specLimits.documentsMax}`);
  });

  it('indexes documents among their kind, and names an unknown kind by position', () => {
    const problems = refused(() => parseSpecObjects([
      svc({ name: 'a' }),
      { apiVersion: 'shoal/v1', kind: 'Servce', name: 'b' },
      svc({ name: 'c', update: { parallelism: 0 } }),
      { apiVersion: 'shoal/v1' },
      'just text',
      { apiVersion: 'shoal/v2', kind: 'Service', name: 'd', image: 'x' },
    ]));
    expect(problems).toEqual([
      'documents[1].kind: unknown kind "Servce"; did you mean Service? shoal/v1 knows Service, Network, FirewallPolicy, Job',
      'services[1].update.parallelism: must be at least 1',
      'documents[3].kind: is required; shoal/v1 knows Service, Network, FirewallPolicy, Job',
      'documents[4]: must be a mapping with apiVersion and kind, not a string',
      'services[2].apiVersion: "shoal/v2" is not a version this release speaks; write apiVersion: shoal/v1',
    ]);
  });

  it('refuses two services of one name, even when one has other problems', () => {
    expect(refused(() => parseSpecObjects([svc({ name: 'a' }), svc({ name: 'b' }), svc({ name: 'a', replicas: -1 })]))).toEqual([
      'services[2].name: a is already declared by services[0]',
      'services[2].replicas: must be at least 0',
    ]);
  });
});

describe('every problem at once, with its path', () => {
  it('reports all of them and returns nothing', () => {
    const text = `${head}name: Web
image: busybox:local
replica: 3
resources: {reservations: {memory: 12 parsecs, cpu: 500m}, limits: {memory: 512m}}
update: {parallelism: 0}
env: {A: 1.10}
constraints: ["node.labels.role == db", "node.labels.role ~ db"]
ports: [{published: 80, target: 80}, {published: 80, target: 81}]
privileged: "yes"
---
${head}name: web
image: x
replicas: -1
healthCheck: {command: [], interval: 10}
`;
    expect(refused(() => parseSpecs(text))).toEqual([
      'services[0].replica: unknown field; did you mean replicas?',
      'services[0].name: "Web" is not a DNS label (lower-case letters, digits and -, starting with a letter, ending with a letter or digit, at most 63 characters)',
      'services[0].env.A: must be a string, not the number 1.1; quote it in the file if text is meant (YAML reads 1.10 as the number 1.1, and true as a boolean)',
      'services[0].resources.reservations.memory: "12 parsecs" is not a memory quantity; write bytes or a number with k, M, G, T, Ki, Mi, Gi or Ti (512Mi, 1Gi)',
      'services[0].resources.limits.memory: "512m": "m" is ambiguous (Docker reads 512m as MiB, Kubernetes as millibytes); write Mi, Gi, Ki (binary) or M, G, k (decimal)',
      'services[0].constraints[1]: "node.labels.role ~ db" is not a constraint shoal knows; write node.labels.KEY == value, node.labels.KEY != value, node.labels.KEY in (a, b), or the same with node.name, node.id, node.platform.os, node.platform.arch or node.role',
      'services[0].privileged: must be true or false, not a string; write true or false without quotes',
      'services[0].update.parallelism: must be at least 1',
      'services[0].ports[1].published: 80/tcp is already published by ports[0]; a node port can be published once',
      'services[1].replicas: must be at least 0',
      'services[1].healthCheck.command: must not be empty; omit it to keep the image\'s health check',
      'services[1].healthCheck.interval: 10 has no unit; write a duration such as 10s, 1m30s or 500ms',
    ]);
  });

  it('caps the problems listed, and counts the rest', () => {
    const docs = Array.from({ length: specLimits.problemsMax + 5 }, (_, i) => svc({ name: `s${i}`, replicas: -1 }));
    try {
      parseSpecObjects(docs);
      expect.unreachable();
    } catch (err) {
      const e = err as ShoalError;
      expect((e.details?.problems as Problem[]).length).toBe(specLimits.problemsMax);
      expect(e.details?.problemsNotShown).toBe(5);
      expect(e.message).toContain('... and 5 more');
    }
  });
});

describe('values and the checks across fields', () => {
  it.each([
    [{ name: '9lives' }, 'services[0].name: "9lives" is not a DNS label'],
    [{ name: 'a'.repeat(64) }, 'is not a DNS label'],
    [{ image: 'Busybox' }, 'services[0].image: "Busybox" is not an image reference'],
    [{ image: 'busybox:' }, 'is not an image reference'],
    [{ image: 7 }, 'services[0].image: must be a string, not the number 7'],
    [{ command: [] }, 'services[0].command: must not be empty; omit it to keep the image\'s entrypoint'],
    [{ command: 'sleep 1' }, 'services[0].command: must be a list, not a string'],
    [{ args: [1] }, 'services[0].args[0]: must be a string'],
    [{ env: { '1X': 'a' } }, 'services[0].env["1X"]: is not a variable name'],
    [{ env: ['A=b'] }, 'services[0].env: must be a mapping of names to strings, not a list'],
    [{ env: JSON.parse('{"__proto__": "x"}') as unknown }, 'services[0].env.__proto__: cannot be stored'],
    [{ user: 'a b' }, 'services[0].user: "a b" is not a user'],
    [{ mode: 'daemon' }, 'services[0].mode: "daemon" is not one of replicated, global'],
    [{ replicas: 1.5 }, 'services[0].replicas: must be a whole number, not the number 1.5'],
    [{ replicas: specLimits.replicasMax + 1 }, `services[0].replicas: must be at most ${specLimits.replicasMax}`],
    [{ mode: 'global', replicas: 2 }, 'services[0].replicas: a global service runs one task on each eligible node'],
    [{ mode: 'global', maxPerNode: 2 }, 'services[0].maxPerNode: a global service runs one task per node already'],
    [{ resources: { reservations: { memory: '2Gi' }, limits: { memory: '1Gi' } } }, 'services[0].resources.limits.memory: must be at least the reservation (2 GiB)'],
    [{ resources: { reservations: { cpu: 2 }, limits: { cpu: '500m' } } }, 'services[0].resources.limits.cpu: must be at least the reservation (2 CPUs)'],
    [{ resources: { limits: { memory: '1Mi' } } }, 'services[0].resources.limits.memory: must be at least 6 MiB'],
    [{ resources: { limits: { cpu: 0 } } }, 'services[0].resources.limits.cpu: must be at least 0.001 CPU'],
    [{ resources: { cpu: 1 } }, 'services[0].resources.cpu: unknown field'],
    [{ constraints: ['node.labels.role == db', 'node.labels.role == web'] }, 'services[0].constraints: node.labels.role == db and node.labels.role == web cannot both hold, so no node could ever take a task'],
    [{ placement: { strategy: 'binpack', spreadOver: 'rack' } }, 'services[0].placement.spreadOver: spreads tasks, and binpack packs them; use one'],
    [{ placement: 'binpack' }, 'services[0].placement: must be a mapping, not a string'],
    [{ maxPerNode: 0 }, 'services[0].maxPerNode: must be at least 1'],
    [{ ports: [{ published: 70000, target: 80 }] }, 'services[0].ports[0].published: must be at most 65535'],
    [{ ports: [{ target: 80 }] }, 'services[0].ports[0].published: is required'],
    [{ ports: [{ published: 80, target: 80, protocol: 'sctp' }] }, 'services[0].ports[0].protocol: "sctp" is not one of tcp, udp'],
    [{ hostNetwork: true, ports: [{ published: 8080, target: 80 }] }, 'services[0].ports[0].published: with hostNetwork the container binds the node\'s port itself, so published must equal target (80)'],
    [{ hostNetwork: true, networks: ['back'] }, 'services[0].networks: a service with hostNetwork uses the node\'s own network and cannot join overlay networks; drop hostNetwork or networks'],
    [{ mounts: [{ type: 'bind', source: 'data', target: '/data' }] }, 'services[0].mounts[0].source: "data" is not an absolute host path'],
    [{ mounts: [{ type: 'bind', source: '/srv/../etc', target: '/data' }] }, 'services[0].mounts[0].source: "/srv/../etc" is not an absolute host path'],
    [{ mounts: [{ type: 'volume', source: '/srv', target: '/data' }] }, 'services[0].mounts[0].source: "/srv" is not a volume name'],
    [{ mounts: [{ type: 'tmpfs', source: 'x', target: '/data' }] }, 'services[0].mounts[0].type: "tmpfs" is not one of bind, volume'],
    [{ mounts: [{ type: 'volume', source: 'a', target: '/' }] }, 'services[0].mounts[0].target: "/" is not a container path'],
    [{ mounts: [{ type: 'volume', source: 'a', target: '/d' }, { type: 'volume', source: 'b', target: '/d' }] }, 'services[0].mounts[1].target: /d is already given by mounts[0]'],
    [{ devices: [{ hostPath: '/tmp/x' }] }, 'services[0].devices[0].hostPath: "/tmp/x" is not under /dev/'],
    [{ devices: [{ hostPath: '/dev/a', permissions: 'rwx' }] }, 'services[0].devices[0].permissions: "rwx" is not device permissions'],
    [{ devices: [{ hostPath: '/dev/a', permissions: 'rr' }] }, 'is not device permissions'],
    [{ devices: [{ hostPath: '/dev/a' }, { hostPath: '/dev/b', containerPath: '/dev/a' }] }, 'services[0].devices[1].containerPath: /dev/a is already given by devices[0]'],
    [{ capAdd: ['NET_FLY'] }, 'services[0].capAdd[0]: "NET_FLY" is not a Linux capability'],
    [{ capAdd: ['NET_ADMIN', 'cap_net_admin'] }, 'services[0].capAdd[1]: NET_ADMIN is already given by capAdd[0]'],
    [{ capAdd: ['NET_ADMIN'], capDrop: ['CAP_NET_ADMIN'] }, 'services[0].capDrop[0]: NET_ADMIN is also in capAdd'],
    [{ healthCheck: { interval: '10s' } }, 'services[0].healthCheck.command: is required'],
    [{ healthCheck: { command: ['true'], interval: '10ms' } }, 'services[0].healthCheck.interval: must be at least 100ms'],
    [{ healthCheck: { command: ['true'], retries: 0 } }, 'services[0].healthCheck.retries: must be at least 1'],
    [{ stopSignal: 'SIGSTOP' }, 'services[0].stopSignal: "SIGSTOP" is not a stop signal shoal sends'],
    [{ stopGracePeriod: '2d' }, 'services[0].stopGracePeriod: "2d" is not a duration'],
    [{ stopGracePeriod: '25h' }, 'services[0].stopGracePeriod: must be at most 24h'],
    [{ logs: { maxSize: '10' } }, 'services[0].logs.maxSize: must be at least 1 KiB'],
    [{ logs: { maxFiles: 0 } }, 'services[0].logs.maxFiles: must be at least 1'],
    [{ restart: { condition: 'unless-stopped' } }, 'services[0].restart.condition: "unless-stopped" is not one of always, on-failure, never'],
    [{ restart: { delay: '1m', maxDelay: '10s' } }, 'services[0].restart.maxDelay: must be at least delay (1m)'],
    [{ restart: { maxAttempts: 0 } }, 'services[0].restart.maxAttempts: must be at least 1'],
    [{ update: { failureAction: 'continue' } }, 'services[0].update.failureAction: "continue" is not one of pause, rollback'],
    [{ update: { order: 'start-first' }, exclusive: true }, 'services[0].update.order: an exclusive service is always updated stop-first'],
    [{ exclusive: 'true' }, 'services[0].exclusive: must be true or false'],
    [{ disruption: {} }, 'services[0].disruption.maxUnavailable: is required'],
    [{ disruption: { maxUnavailable: -1 } }, 'services[0].disruption.maxUnavailable: must be at least 0'],
    [{ disruption: { maxUnavailable: 1.5 } }, 'services[0].disruption.maxUnavailable: must be a whole number'],
    [{ disruption: { maxUnavailable: '150%' } }, 'services[0].disruption.maxUnavailable: 150% is more than all of the service\'s slots; at most 100%'],
    [{ disruption: { maxUnavailable: 'half' } }, 'services[0].disruption.maxUnavailable: must be a whole number of slots (2) or a percentage of the service\'s slots (\'25%\'), not "half"'],
    [{ disruption: { maxUnavailable: '2.5%' } }, 'services[0].disruption.maxUnavailable: must be a whole number of slots'],
    [{ disruption: { maxUnavailable: 1, minAvailable: 2 } }, 'services[0].disruption.minAvailable: unknown field'],
    [{ secrets: 'db' }, 'services[0].secrets: must be a list, not a string'],
    [{ secrets: ['Db_Password'] }, 'services[0].secrets[0]: "Db_Password" is not a DNS label'],
    [{ secrets: [{ target: 'x' }] }, 'services[0].secrets[0].name: is required'],
    [{ secrets: [{ name: 'db', file: 'x' }] }, 'services[0].secrets[0].file: unknown field'],
    [{ secrets: [{ name: 'db', target: '/etc/./db' }] }, 'services[0].secrets[0].target: "/etc/./db" is not an absolute container path'],
    [{ secrets: [{ name: 'db', target: '..' }] }, 'services[0].secrets[0].target: ".." is not a file name under /run/secrets/'],
    [{ secrets: [{ name: 'db', mode: 440 }] }, "services[0].secrets[0].mode: write the mode as a quoted octal string"],
    [{ secrets: [{ name: 'db', mode: '0800' }] }, "services[0].secrets[0].mode: \"0800\" is not an octal file mode"],
    [{ secrets: ['db', { name: 'other', target: 'db' }] }, 'services[0].secrets[1].target: /run/secrets/db is already given by secrets[0]'],
    [{ networks: ['a', 'a'] }, 'services[0].networks[1]: a is already given by networks[0]'],
    [{ networks: ['Backend'] }, 'services[0].networks[0]: "Backend" is not a DNS label'],
    [{ network: ['a'] }, 'services[0].network: unknown field; did you mean networks?'],
    [{ host_network: true }, 'services[0].host_network: unknown field; did you mean hostNetwork?'],
    [{ Image: 'x' }, 'services[0].Image: unknown field; did you mean image?'],
  ])('%j', (fields, expected) => {
    const problems = refused(() => parseSpecObjects([svc(fields)]));
    expect(problems.some((p) => p.includes(expected)), `${expected}\nin:\n${problems.join('\n')}`).toBe(true);
  });

  it('reads a disruption budget as slots or as a percentage', () => {
    expect(one({ disruption: { maxUnavailable: 2 } }).disruption).toEqual({ maxUnavailable: 2, unit: 'slots' });
    expect(one({ disruption: { maxUnavailable: 0 } }).disruption).toEqual({ maxUnavailable: 0, unit: 'slots' });
    expect(one({ disruption: { maxUnavailable: '25%' } }).disruption).toEqual({ maxUnavailable: 25, unit: 'percent' });
    expect(parseSpecs(`${head}name: web\nimage: x\ndisruption: {maxUnavailable: 34%}\n`).services[0]?.disruption).toEqual({ maxUnavailable: 34, unit: 'percent' });
    expect(one({ disruption: null }).disruption).toBeNull();
  });

  it('checks across fields even when another field is wrong', () => {
    const problems = refused(() => parseSpecObjects([svc({ image: 'BAD', ports: [{ published: 1, target: 1 }, { published: 1, target: 1 }] })]));
    expect(problems).toHaveLength(2);
  });

  it('normalizes what has one meaning written several ways', () => {
    const s = one({ placement: { spreadOver: 'node.labels.rack' }, capAdd: ['cap_sys_time', 'NET_ADMIN'], stopSignal: 'term', devices: [{ hostPath: '/dev/x', permissions: 'wr' }] });
    expect(s.placement.spreadOver).toBe('rack');
    expect(s.capAdd).toEqual(['NET_ADMIN', 'SYS_TIME']);
    expect(s.stopSignal).toBe('SIGTERM');
    expect(s.devices[0]?.permissions).toBe('rw');
  });

  it('reads a secret by its name alone, or in full, and renders the mode back as octal', () => {
    const s = one({ secrets: ['db', { name: 'tls', target: 'tls.key', mode: '444' }, { name: 'ro', mode: '0000' }] });
    expect(s.secrets).toEqual([
      { name: 'db', target: 'db', mode: 0o400 }, { name: 'tls', target: 'tls.key', mode: 0o444 }, { name: 'ro', target: 'ro', mode: 0 },
    ]);
    expect(renderService(s).secrets).toEqual([
      { name: 'db', target: 'db', mode: '0400' }, { name: 'tls', target: 'tls.key', mode: '0444' }, { name: 'ro', target: 'ro', mode: '0000' },
    ]);
  });

  it('reads a stored spec written before secrets existed as one without secrets', () => {
    const { secrets: _none, ...old } = one({});
    expect(serviceSpecSchema.parse(old)).toEqual(one({}));
  });

  it('lets null say "none" where none is the default', () => {
    const s = one({ command: null, args: null, user: null, maxPerNode: null, healthCheck: null, resources: { limits: { cpu: null, memory: null } }, placement: { spreadOver: null }, restart: { maxAttempts: null } });
    expect(s).toEqual(one({}));
  });

  it('never lets the restart cap fall below the delay asked for', () => {
    expect(one({ restart: { delay: '10m' } }).restart).toMatchObject({ delayMs: 600_000, maxDelayMs: 600_000 });
    expect(one({ restart: { delay: '1s' } }).restart).toMatchObject({ delayMs: 1000, maxDelayMs: 300_000 });
  });

  it('accepts replicas: 0 (scaled to zero)', () => {
    expect(one({ replicas: 0 }).replicas).toBe(0);
  });
});

describe('YAML that surprises is refused', () => {
  it.each([
    [`${head}name: a\nname: b\nimage: x\n`, 'documents[0]: not valid YAML: Map keys must be unique at line 4, column 1'],
    [`${head}name: a\nimage: &img x\n`, 'documents[0]: YAML anchor &img is refused'],
    [`${head}name: a\nimage: x\nenv: &e {A: b}\n---\n${head}name: b\nimage: x\nenv: *e\n`, 'documents[1]: YAML alias *e is refused'],
    [`${head}name: a\nimage: !!str x\n`, 'documents[0]: YAML tag tag:yaml.org,2002:str is refused: quote the value instead'],
    [`${head}name: a\nimage: x\n<<: {replicas: 2}\n`, 'services[0]["<<"]: unknown field'],
    [`${head}name: a\nimage: [x\n`, 'documents[0]: not valid YAML'],
    [`${head}name: a\nimage: x\nprivileged: yes\n`, 'services[0].privileged: must be true or false, not a string; write true or false without quotes'],
  ])('%s', (text, expected) => {
    const problems = refused(() => parseSpecs(text));
    expect(problems.some((p) => p.startsWith(expected)), problems.join('\n')).toBe(true);
  });

  it('refuses duplicate keys in JSON, which JSON.parse would quietly keep the last of', () => {
    const problems = refused(() => parseSpecs('{"apiVersion": "shoal/v1", "kind": "Service", "name": "a", "name": "b", "image": "x"}', 'json'));
    expect(problems[0]).toContain('Map keys must be unique');
  });

  it('refuses text that is not JSON when JSON is asked for', () => {
    expect(refused(() => parseSpecs('name: a', 'json'))[0]).toMatch(/^documents: not valid JSON/);
  });
});
