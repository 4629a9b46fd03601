// The compose reader: interpolation, .env, several files merged by the specification's rules,
// profiles, x- fields, anchors and merge keys; and the mapping of each field to shoal's
// vocabulary, with every refusal named by its path.

import { describe, expect, it } from 'vitest';
import { jobTaskSpec } from '../../src/resources/jobs.ts';
import type { JobSpec } from '../../src/resources/spec/job-spec.ts';
import { compileStack, loadCompose, parseEnvFile, splitCommand, interpolate, serviceFields, type Compiled } from '../../src/resources/compose/index.ts';
import { Problems, type Problem } from '../../src/resources/spec/reader.ts';
import { isShoalError } from '../../src/errors.ts';

function load(texts: string[], env: Record<string, string> = {}, opts: { dotEnv?: string; profiles?: string[] } = {}) {
  const problems = new Problems();
  const loaded = loadCompose({ files: texts.map((text, i) => ({ path: `f${i}.yaml`, text })), env, dotEnv: opts.dotEnv, profiles: opts.profiles ?? [] }, problems);
  return { ...loaded, problems: problems.list };
}

function compile(text: string, opts: { env?: Record<string, string>; files?: Record<string, string>; networks?: Map<string, string> } = {}): Compiled {
  const l = load([text], opts.env ?? {});
  expect(l.problems).toEqual([]);
  return compileStack({
    stack: 'st', model: l.model, unset: l.unset, lookup: (n) => opts.env?.[n], networks: opts.networks ?? new Map(),
    readFile: (p) => (opts.files?.[p] === undefined ? undefined : Buffer.from(opts.files[p] ?? '')),
  });
}

function refused(text: string, opts: Parameters<typeof compile>[1] = {}): Problem[] {
  try {
    compile(text, opts);
  } catch (err) {
    if (isShoalError(err) && err.code === 'bad_request') return err.details?.problems as Problem[];
    throw err;
  }
  throw new Error('not refused');
}

const svc = (c: Compiled, name = 'st-web') => {
  const s = c.set.services.find((x) => x.name === name);
  if (s === undefined) throw new Error(`no ${name}`);
  return s;
};

describe('interpolation', () => {
  const run = (text: string, vars: Record<string, string>) => {
    const p = new Problems();
    return { out: interpolate(text, (n) => vars[n], 'x', p), problems: p.list };
  };
  it('reads every form of the specification', () => {
    const vars = { A: 'a', E: '' };
    expect(run('$A ${A} ${B:-dflt} ${E:-empty} ${E-set} ${A:+alt} ${B+alt} $$A ${B:-${A}x} end$', vars).out).toBe('a a dflt empty  alt  $A ax end$');
  });
  it('refuses a missing required variable with its message, and a malformed expression', () => {
    expect(run('${DB_PASSWORD:?set the password}', {}).problems[0]?.message).toContain('set the password');
    expect(run('${E:?}', { E: '' }).problems[0]?.message).toContain('empty');
    expect(run('${A', {}).problems[0]?.message).toContain('not closed');
    expect(run('${A!x}', {}).problems[0]?.message).toContain('not an expression');
  });
  it('interpolates values, never keys or x- fields; and says which variables are not set', () => {
    const l = load(['services:\n  web:\n    image: "nginx:${TAG}"\n    environment:\n      ${KEY}: v\nx-notes: ${NOT_READ}\n'], { TAG: '1.27' });
    expect(l.model).toEqual({ services: { web: { image: 'nginx:1.27', environment: { '${KEY}': 'v' } } }, 'x-notes': '${NOT_READ}' });
    const u = load(['services:\n  web:\n    image: "nginx:${TAG}"\n    user: ${U:-1000}\n']);
    expect(u.unset).toEqual(['TAG']);
  });
  it('takes the environment over the .env file', () => {
    const l = load(['services:\n  web:\n    image: "x:${A}-${B}"\n'], { A: 'env' }, { dotEnv: 'A=dot\n# c\nexport B="quoted # not a comment"\n' });
    expect((l.model.services as Record<string, { image: string }>).web?.image).toBe('x:env-quoted # not a comment');
  });
  it('reads .env files and splits commands as Compose does', () => {
    const p = new Problems();
    expect([...parseEnvFile("A=1\nB = two words # c\nC='lit $x'\nD=\"a\\nb\"\nNOVALUE\n\n", 'e', p)]).toEqual([['A', '1'], ['B', 'two words'], ['C', 'lit $x'], ['D', 'a\nb']]);
    expect(splitCommand(`sh -c 'echo "$HOME" && ls' --x="a b"`)).toEqual(['sh', '-c', 'echo "$HOME" && ls', '--x=a b']);
    expect(splitCommand('a "b')).toBeNull();
  });
});

describe('files, merge, profiles, anchors', () => {
  it('merges several files: scalars replaced, command replaced, environment and ports merged', () => {
    const base = 'services:\n  web:\n    image: nginx:1\n    command: [a, b]\n    environment: [A=1, B=2]\n    ports: ["80:80"]\n    volumes: ["data:/data"]\n';
    const over = 'services:\n  web:\n    image: nginx:2\n    command: [c]\n    environment: {B: "3", C: "4"}\n    ports: ["443:443"]\n    volumes: ["/srv:/data:ro"]\n  db:\n    image: postgres:16\n';
    const l = load([base, over]);
    expect(l.model.services).toEqual({
      web: { image: 'nginx:2', command: ['c'], environment: { A: '1', B: '3', C: '4' }, ports: ['80:80', '443:443'], volumes: ['/srv:/data:ro'] },
      db: { image: 'postgres:16' },
    });
  });
  it('reads anchors, aliases and merge keys, and refuses an alias bomb and custom tags', () => {
    const l = load(['x-base: &base\n  image: nginx:1\n  restart: always\nservices:\n  a:\n    <<: *base\n  b:\n    <<: *base\n    image: nginx:2\n']);
    expect(l.model.services).toEqual({ a: { image: 'nginx:1', restart: 'always' }, b: { image: 'nginx:2', restart: 'always' } });
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`)].join('\n');
    expect(load([bomb]).problems[0]?.message).toMatch(/not read|alias/i);
    expect(load(['services:\n  web: !reset {}\n']).problems[0]?.message).toContain('!reset');
  });
  it('leaves out services of profiles not asked for, and refuses a dependency on one', () => {
    const text = 'services:\n  web:\n    image: nginx:1\n  debug:\n    image: busybox:1\n    profiles: [debug]\n';
    expect(Object.keys(load([text]).model.services as object)).toEqual(['web']);
    expect(load([text]).skipped).toEqual(['debug']);
    expect(Object.keys(load([text], {}, { profiles: ['debug'] }).model.services as object)).toEqual(['web', 'debug']);
    expect(Object.keys(load([text], { COMPOSE_PROFILES: 'debug' }).model.services as object)).toEqual(['web', 'debug']);
    const dep = load([`${text}    \n  app:\n    image: a:1\n    depends_on: [debug]\n`]);
    expect(dep.problems.map((p) => p.path)).toEqual(['services.app.depends_on.debug']);
  });
  it('reports YAML errors of every file with the file name', () => {
    const l = load(['services: [', 'services:\n  a: 1\n  a: 2\n']);
    expect(l.problems.map((p) => p.path)).toEqual(['f0.yaml', 'f1.yaml']);
  });
});

describe('mapping to shoal resources', () => {
  it('names resources after the stack, gives a default network, maps entrypoint, command and environment', () => {
    const c = compile('version: "3.8"\nx-any: 1\nservices:\n  web:\n    image: nginx:1.27\n    entrypoint: /docker-entrypoint.sh\n    command: nginx -g "daemon off;"\n    environment: [A=1, B, C=]\n    user: 101\n', { env: { B: 'from-env' } });
    const s = svc(c);
    expect([s.command, s.args, s.env, s.user, s.networks]).toEqual([['/docker-entrypoint.sh'], ['nginx', '-g', 'daemon off;'], { A: '1', B: 'from-env', C: '' }, '101', ['st-default']]);
    expect(c.set.networks).toEqual([{ name: 'st-default', subnet: '10.208.0.0/20', internal: false, slicePrefix: 24 }]);
  });
  it('keeps an existing stack network\'s subnet and avoids every other network\'s', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    networks: [front, back]\nnetworks:\n  front: {}\n  back: {internal: true}\n', { networks: new Map([['st-back', '10.208.16.0/20'], ['other', '10.208.0.0/20']]) });
    expect(c.set.networks.map((n) => [n.name, n.subnet, n.internal])).toEqual([['st-back', '10.208.16.0/20', true], ['st-front', '10.208.32.0/20', false]]);
  });
  it('reads ports in every syntax: ranges, udp, long form; refuses unpublished ports', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    ports: ["8000-8001:80-81", "53:53/udp", 9000, "0.0.0.0:443:443", {target: 22, published: "2222", protocol: tcp, mode: host}]\n'.replace('9000, ', ''));
    expect(svc(c).ports.map((p) => `${p.published}:${p.target}/${p.protocol}`)).toEqual(['8000:80/tcp', '8001:81/tcp', '53:53/udp', '443:443/tcp', '2222:22/tcp']);
    expect(refused('services:\n  web:\n    image: nginx:1\n    ports: ["3000", "80-81:80"]\n').map((p) => p.path)).toEqual(['services.web.ports[0]', 'services.web.ports[1]']);
  });
  it('maps volumes (named, bind, long form, read_only) and refuses anonymous and undeclared ones', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    volumes: ["data:/data", "/srv/x:/x:ro", {type: bind, source: /etc/localtime, target: /etc/localtime, read_only: true}, "ext:/ext"]\nvolumes:\n  data: {}\n  ext: {external: true, name: shared}\n');
    expect(svc(c).mounts).toEqual([
      { type: 'volume', source: 'st_data', target: '/data', readOnly: false }, { type: 'bind', source: '/srv/x', target: '/x', readOnly: true },
      { type: 'bind', source: '/etc/localtime', target: '/etc/localtime', readOnly: true }, { type: 'volume', source: 'shared', target: '/ext', readOnly: false },
    ]);
    expect(refused('services:\n  web:\n    image: nginx:1\n    volumes: ["/data", "nope:/x", "~/x:/y", {type: tmpfs, target: /t}]\nvolumes:\n  nfs: {driver_opts: {type: nfs}}\n').map((p) => p.path))
      .toEqual(['volumes.nfs.driver_opts', 'services.web.volumes[0]', 'services.web.volumes[1]', 'services.web.volumes[2]', 'services.web.volumes[3].type']);
  });
  it('maps healthcheck, restart, logging, stop fields, devices and capabilities', () => {
    const c = compile(`services:
  web:
    image: nginx:1
    healthcheck: {test: "curl -f localhost", interval: 1m30s, timeout: 5s, retries: 2, start_period: 10s}
    restart: on-failure:5
    logging: {driver: json-file, options: {max-size: 20m, max-file: "5"}}
    stop_signal: SIGQUIT
    stop_grace_period: 1m
    devices: ["/dev/ttyUSB0:/dev/zigbee:rw"]
    cap_add: [NET_ADMIN]
    cap_drop: [ALL]
    privileged: false
  off:
    image: nginx:1
    healthcheck: {disable: true}
    restart: "no"
`);
    const s = svc(c);
    expect(s.healthCheck).toEqual({ command: ['/bin/sh', '-c', 'curl -f localhost'], intervalMs: 90_000, timeoutMs: 5_000, retries: 2, startPeriodMs: 10_000 });
    expect([s.restart.condition, s.restart.maxAttempts, s.logs, s.stopSignal, s.stopGracePeriodMs]).toEqual(['on-failure', 5, { maxSizeBytes: 20 * 1024 ** 2, maxFiles: 5 }, 'SIGQUIT', 60_000]);
    expect([s.devices, s.capAdd, s.capDrop]).toEqual([[{ hostPath: '/dev/ttyUSB0', containerPath: '/dev/zigbee', permissions: 'rw' }], ['NET_ADMIN'], ['ALL']]);
    expect([svc(c, 'st-off').healthCheck, svc(c, 'st-off').restart.condition]).toEqual([null, 'never']);
  });
  it('maps deploy: mode, replicas, placement, resources, update_config, restart_policy', () => {
    const c = compile(`services:
  web:
    image: nginx:1
    deploy:
      replicas: 3
      endpoint_mode: dnsrr
      placement:
        constraints: ["node.labels.zone==a", "node.hostname != pi1"]
        preferences: [{spread: node.labels.rack}]
        max_replicas_per_node: 2
      resources: {limits: {cpus: "0.5", memory: 256M}, reservations: {memory: 128m}}
      update_config: {parallelism: 2, delay: 10s, failure_action: rollback, monitor: 30s, order: start-first}
      restart_policy: {condition: any, delay: 5s, max_attempts: 3}
`);
    const s = svc(c);
    expect([s.replicas, s.constraints.map((x) => x.text), s.placement, s.maxPerNode]).toEqual([3, ['node.labels.zone == a', 'node.name != pi1'], { strategy: 'spread', spreadOver: 'rack' }, 2]);
    expect(s.resources).toEqual({ limits: { cpuMillis: 500, memoryBytes: 256 * 1024 ** 2 }, reservations: { cpuMillis: 0, memoryBytes: 128 * 1024 ** 2 } });
    expect(s.update).toEqual({ parallelism: 2, delayMs: 10_000, failureAction: 'rollback', monitorMs: 30_000, order: 'start-first' });
    expect(s.restart).toMatchObject({ condition: 'always', delayMs: 5_000, maxAttempts: 3 });
    expect(refused('services:\n  web:\n    image: nginx:1\n    deploy:\n      mode: global-job\n      placement: {constraints: ["engine.labels.os == linux"]}\n      update_config: {failure_action: continue}\n').map((p) => p.path))
      .toEqual(['services.web.deploy.mode', 'services.web.deploy.placement.constraints[0]', 'services.web.deploy.update_config.failure_action']);
  });
  it('maps Swarm\'s node.role and node.platform constraints, with Swarm\'s architecture names, and refuses values no node has', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    deploy:\n      placement:\n        constraints: ["node.role == manager", "node.platform.os == linux", "node.platform.arch != x86_64", "node.role!=worker"]\n');
    expect(svc(c).constraints.map((x) => x.text)).toEqual(['node.role == manager', 'node.platform.os == linux', 'node.platform.arch != amd64', 'node.role != worker']);
    const problems = refused('services:\n  web:\n    image: nginx:1\n    deploy:\n      placement:\n        constraints: ["node.role == leader", "node.platform.arch == sparc"]\n');
    expect(problems.map((p) => p.path)).toEqual(['services.web.deploy.placement.constraints[0]', 'services.web.deploy.placement.constraints[1]']);
    expect(problems.map((p) => p.message).join('\n')).toMatch(/not a node role: write manager \(a raft voter\) or worker[\s\S]*not an architecture an image names/);
  });
  it('maps deploy.mode replicated-job to a Job (no schedule), its retries from restart_policy, and refuses what a job cannot do', () => {
    const c = compile(`services:
  web:
    image: nginx:1
    depends_on: [migrate]
  migrate:
    image: app:1
    command: ["migrate", "--up"]
    environment: {DB: db}
    secrets: [pw]
    healthcheck: {test: ["CMD", "true"]}
    working_dir: /srv/app
    labels: {team: ops}
    deploy:
      mode: replicated-job
      restart_policy: {condition: on-failure, max_attempts: 5}
secrets:
  pw: {environment: PW}
`.replace('    depends_on: [migrate]\n', ''), { env: { PW: 'x' } });
    expect(c.set.services.map((s) => s.name)).toEqual(['st-web']);
    expect(c.set.jobs).toHaveLength(1);
    expect(c.set.jobs[0]).toMatchObject({ name: 'st-migrate', image: 'app:1', args: ['migrate', '--up'], env: { DB: 'db' }, schedule: null, backoffLimit: 5, secrets: [{ name: 'st-pw' }], workingDir: '/srv/app', labels: { team: 'ops' } });
    // The job's task carries its container settings as a service's would.
    expect(jobTaskSpec(c.set.jobs[0] as JobSpec)).toMatchObject({ workingDir: '/srv/app', labels: { team: 'ops' }, exclusive: true });
    expect(c.secrets.map((s) => s.name)).toEqual(['st-pw']);
    expect(c.warnings.map((w) => w.path)).toContain('services.migrate.healthcheck');
    const job = (extra: string): string => `services:\n  web:\n    image: nginx:1\n  migrate:\n    image: app:1\n${extra}`;
    expect(compile(job('    restart: "no"\n    deploy: {mode: replicated-job}\n')).set.jobs[0]?.backoffLimit).toBe(0);
    expect(refused(job('    ports: ["80:80"]\n    deploy: {mode: replicated-job, replicas: 3, restart_policy: {condition: any}}\n')).map((p) => p.path))
      .toEqual(['services.migrate.deploy.replicas', 'services.migrate.ports', 'services.migrate.deploy.restart_policy']);
    expect(refused(job('    deploy: {mode: replicated-job}\n').replace('    image: nginx:1\n', '    image: nginx:1\n    depends_on: [migrate]\n')).map((p) => p.path))
      .toEqual(['services.web.depends_on.migrate']);
  });

  it('reads secrets and configs from files, environment and content, delivered under /run/secrets/', () => {
    const c = compile(`services:
  web:
    image: nginx:1
    secrets: [db_password, {source: api_key, target: key, mode: 0440}]
    configs: [{source: conf, target: /run/secrets/app.conf}]
secrets:
  db_password: {file: ./pw.txt}
  api_key: {environment: API_KEY}
  unused: {file: ./missing-but-unused.txt}
configs:
  conf: {content: "a = 1"}
`.replace('  unused: {file: ./missing-but-unused.txt}\n', ''), { env: { API_KEY: 'k' }, files: { './pw.txt': 'pw' } });
    expect(svc(c).secrets).toEqual([
      { name: 'st-db-password', target: 'db_password', mode: 0o400 }, { name: 'st-api-key', target: 'key', mode: 0o440 }, { name: 'st-conf', target: 'app.conf', mode: 0o400 },
    ]);
    expect(c.secrets.map((s) => [s.name, Buffer.from(s.bytes).toString()])).toEqual([['st-db-password', 'pw'], ['st-api-key', 'k'], ['st-conf', 'a = 1']]);
    expect(refused('services:\n  web:\n    image: nginx:1\n    secrets: [nope, {source: pw, uid: "1000"}]\n    configs: [conf]\nsecrets:\n  pw: {file: ./absent}\nconfigs:\n  conf: {content: x}\n').map((p) => p.path))
      .toEqual(['secrets.pw.file', 'services.web.secrets[0]', 'services.web.secrets[1]']);
  });
  it('reads env_file, with environment over it', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    env_file: [app.env, {path: opt.env, required: false}]\n    environment: {B: env}\n', { files: { 'app.env': 'A=file\nB=file\n' } });
    expect(svc(c).env).toEqual({ A: 'file', B: 'env' });
    expect(refused('services:\n  web:\n    image: nginx:1\n    env_file: absent.env\n').map((p) => p.path)).toEqual(['services.web.env_file']);
  });
  it('honours depends_on in both forms and refuses service_healthy on a service without a healthcheck', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    depends_on: [db]\n  api:\n    image: a:1\n    depends_on: {db: {condition: service_healthy}, init: {condition: service_completed_successfully}}\n  db:\n    image: postgres:16\n    healthcheck: {test: [CMD, pg_isready]}\n  init:\n    image: a:1\n    restart: "no"\n');
    expect(c.dependsOn).toEqual({ 'st-web': { 'st-db': 'service_started' }, 'st-api': { 'st-db': 'service_healthy', 'st-init': 'service_completed_successfully' } });
    expect(refused('services:\n  web:\n    image: nginx:1\n    depends_on: {db: {condition: service_healthy}, dbb: {}}\n  db:\n    image: postgres:16\n').map((p) => [p.path, p.message.includes('did you mean db?') || p.message.includes('healthcheck')]))
      .toEqual([['services.web.depends_on.db.condition', true], ['services.web.depends_on.dbb', true]]);
  });
  it('refuses by name what a cluster cannot do, every problem at once, with a hint; warns of the harmless', () => {
    const problems = refused(`services:
  web:
    build: .
    image: nginx:1
    links: [db]
    volumes_from: [db]
    ipc: host
    pid: host
    cgroup_parent: x
    network_mode: "container:db"
    container_name: web
    imagee: typo
    deploy: {replicas: 2}
  db:
    image: postgres:16
    privileged: "yes"
include: [other.yaml]
`);
    expect(problems.map((p) => p.path)).toEqual([
      'include', 'services.web.build', 'services.web.links', 'services.web.volumes_from', 'services.web.ipc', 'services.web.pid', 'services.web.cgroup_parent',
      'services.web.imagee', 'services.web.container_name', 'services.web.network_mode', 'services.db (as shoal\'s privileged)',
    ]);
    expect(problems.find((p) => p.path === 'services.web.imagee')?.message).toContain('did you mean image?');
    expect(problems.find((p) => p.path === 'services.web.links')?.message).toContain('already resolve');
    const ok = compile('services:\n  web:\n    image: nginx:1\n    expose: [80]\n    tty: true\n    stdin_open: true\n    deploy: {endpoint_mode: vip}\n');
    expect(ok.warnings.map((w) => w.path)).toEqual(['services.web.expose', 'services.web.tty', 'services.web.stdin_open', 'services.web.deploy.endpoint_mode']);
  });
  it('has a verdict for every field of the specification\'s service', () => {
    const spec = ['annotations', 'attach', 'blkio_config', 'build', 'cap_add', 'cap_drop', 'cgroup', 'cgroup_parent', 'command', 'configs', 'container_name', 'cpu_count', 'cpu_percent', 'cpu_period', 'cpu_quota', 'cpu_rt_period', 'cpu_rt_runtime', 'cpu_shares', 'cpus', 'cpuset', 'credential_spec', 'depends_on', 'deploy', 'develop', 'device_cgroup_rules', 'devices', 'dns', 'dns_opt', 'dns_search', 'domainname', 'entrypoint', 'env_file', 'environment', 'expose', 'extends', 'external_links', 'extra_hosts', 'gpus', 'group_add', 'healthcheck', 'hostname', 'image', 'init', 'ipc', 'isolation', 'label_file', 'labels', 'links', 'logging', 'mac_address', 'mem_limit', 'mem_reservation', 'mem_swappiness', 'memswap_limit', 'network_mode', 'networks', 'oom_kill_disable', 'oom_score_adj', 'pid', 'pids_limit', 'platform', 'ports', 'post_start', 'pre_stop', 'privileged', 'profiles', 'pull_policy', 'read_only', 'restart', 'runtime', 'scale', 'secrets', 'security_opt', 'shm_size', 'stdin_open', 'stop_grace_period', 'stop_signal', 'storage_opt', 'sysctls', 'tmpfs', 'tty', 'ulimits', 'use_api_socket', 'user', 'userns_mode', 'uts', 'volumes', 'volumes_from', 'working_dir'];
    expect(spec.filter((f) => serviceFields[f] === undefined)).toEqual([]);
  });
});

describe('docs/compose.md', () => {
  it('has a row for every field with the verdict the reader gives it', async () => {
    const { readFileSync } = await import('node:fs');
    const { deployFields, topFields } = await import('../../src/resources/compose/index.ts');
    const doc = readFileSync(new URL('../../docs/compose.md', import.meta.url), 'utf8');
    const missing: string[] = [];
    for (const table of [serviceFields, deployFields, topFields]) {
      for (const [field, v] of Object.entries(table)) if (!doc.includes(`| \`${field}\` | ${v.kind} |`)) missing.push(field);
    }
    expect(missing).toEqual([]);
  });
});

describe('container settings (issue 39)', () => {
  const web = (fields: string) => `services:\n  web:\n    image: nginx:1\n${fields.split('\n').map((l) => `    ${l}`).join('\n')}\n`;

  // Each field: one that compiles (with what it becomes), one bad value refused at its compose path.
  it.each([
    ['working_dir: /srv/app', { workingDir: '/srv/app' }],
    ['hostname: web-1', { hostname: 'web-1' }],
    ['init: true', { init: true }],
    ['read_only: true', { readOnlyRootfs: true }],
    ['shm_size: 128mb', { shmSizeBytes: 128 * 1024 ** 2 }],
    ['tmpfs: /run', { tmpfs: [{ target: '/run', sizeBytes: null, mode: null }] }],
    ['tmpfs: ["/tmp:size=64m,mode=1777", /run]', { tmpfs: [{ target: '/run', sizeBytes: null, mode: null }, { target: '/tmp', sizeBytes: 64 * 1024 ** 2, mode: 0o1777 }] }],
    ['extra_hosts: ["nas:10.0.0.5", "v6=::1", "gw:[fd00::1]"]', { extraHosts: [{ host: 'nas', address: '10.0.0.5' }, { host: 'v6', address: '::1' }, { host: 'gw', address: 'fd00::1' }] }],
    ['extra_hosts: {nas: 10.0.0.5}', { extraHosts: [{ host: 'nas', address: '10.0.0.5' }] }],
    ['dns: 1.1.1.1', { dns: ['1.1.1.1'] }],
    ['dns_search: [lan, example.com]', { dnsSearch: ['lan', 'example.com'] }],
    ['dns_opt: ["ndots:2"]', { dnsOptions: ['ndots:2'] }],
    ['ulimits: {nproc: 65535, nofile: {soft: 20000, hard: 40000}}', { ulimits: [{ name: 'nofile', soft: 20000, hard: 40000 }, { name: 'nproc', soft: 65535, hard: 65535 }] }],
    ['sysctls: ["net.ipv4.conf.all.src_valid_mark=1"]', { sysctls: { 'net.ipv4.conf.all.src_valid_mark': '1' } }],
    ['sysctls: {net.core.somaxconn: 1024, kernel.shmmax: 68719476736}', { sysctls: { 'kernel.shmmax': '68719476736', 'net.core.somaxconn': '1024' } }],
    ['labels: ["traefik.http.routers.web.rule=Host(`web.lan`)", traefik.enable=true, flag]', { labels: { 'traefik.http.routers.web.rule': 'Host(`web.lan`)', 'traefik.enable': 'true', flag: '' } }],
    ['labels: {com.example.port: 8080, com.example.on: true}', { labels: { 'com.example.on': 'true', 'com.example.port': '8080' } }],
  ])('compiles %s', (fields, want) => {
    const c = compile(web(fields));
    expect(c.warnings).toEqual([]);
    expect(svc(c)).toMatchObject(want);
  });

  it('puts deploy.labels (Swarm\'s service labels) on the containers with labels, which win a key both give, warned when they differ', () => {
    const c = compile(web('labels: {traefik.enable: "true", team: web}\ndeploy:\n  labels: ["traefik.http.routers.web.rule=Host(`web.lan`)", traefik.enable=true, team=ops]'));
    expect(svc(c).labels).toEqual({ 'traefik.enable': 'true', 'traefik.http.routers.web.rule': 'Host(`web.lan`)', team: 'web' });
    expect(c.warnings.map((w) => w.path)).toEqual(['services.web.deploy.labels.team']);
    expect(refused(web('deploy:\n  labels: 7')).map((p) => p.path)).toEqual(['services.web.deploy.labels']);
  });

  it.each([
    ['working_dir: srv', 'services.web.working_dir', 'is not a working directory'],
    ['hostname: web_1', 'services.web.hostname', 'is not a hostname'],
    ['init: "yes"', 'services.web.init', 'must be true or false'],
    ['read_only: 1', 'services.web.read_only', 'must be true or false'],
    ['shm_size: lots', 'services.web.shm_size', 'is not a byte value'],
    ['tmpfs: ["/tmp:size=64m,noexec"]', 'services.web.tmpfs[0]', 'the tmpfs option "noexec" is not supported'],
    ['tmpfs: [tmp]', 'services.web.tmpfs[0]', 'is not a container path'],
    ['extra_hosts: ["nas:not-an-ip"]', 'services.web.extra_hosts[0].address', 'is not an IPv4 or IPv6 address'],
    ['dns: [dns.google]', 'services.web.dns[0]', 'is not an IPv4 or IPv6 address'],
    ['dns_search: ["bad domain"]', 'services.web.dns_search[0]', 'is not a domain name'],
    ['dns_opt: ["ndots 2"]', 'services.web.dns_opt[0]', 'is not a resolv.conf option'],
    ['ulimits: {nofile: {soft: 2, hard: 1}}', 'services.web.ulimits.nofile.soft', 'is above hard'],
    ['ulimits: {openfiles: 10}', 'services.web.ulimits.openfiles', 'is not a limit the runtime sets'],
    ['sysctls: {kernel.pid_max: 100000}', 'services.web.sysctls["kernel.pid_max"]', 'is not namespaced'],
    ['sysctls: [net.core.somaxconn]', 'services.web.sysctls[0]', 'must be KEY=VALUE'],
    ['labels: {io.shoal.service: other}', 'services.web.labels["io.shoal.service"]', 'which shoal keeps for its own labels'],
    ['labels: [shoal.stack=x]', 'services.web.labels["shoal.stack"]', 'which shoal keeps for its own labels'],
  ])('refuses %s', (fields, path, message) => {
    const problems = refused(web(fields));
    expect(problems.map((p) => p.path)).toEqual([path]);
    expect(problems[0]?.message).toContain(message);
  });

  it('refuses net.* sysctls with network_mode: host (a hostname it takes), and a tmpfs in volumes with where to write it', () => {
    expect(refused(web('network_mode: host\nhostname: h\nsysctls: {net.core.somaxconn: 1}')).map((p) => p.path)).toEqual(['services.web.sysctls["net.core.somaxconn"]']);
    const p = refused(web('volumes: [{type: tmpfs, target: /run}]'));
    expect(p.map((x) => x.message).join()).toContain('tmpfs:');
  });
});

describe('network aliases (issue 39)', () => {
  const stack = (opts: string) => `services:\n  web:\n    image: nginx:1\n    networks:\n      back:\n${opts.split('\n').map((l) => `        ${l}`).join('\n')}\n  worker:\n    image: nginx:1\n    networks: [back]\nnetworks:\n  back: {}\n`;

  it('compiles aliases into the Service\'s networkAliases on the stack\'s network, sorted', () => {
    const c = compile(stack('aliases: [www, app]'));
    expect(c.warnings).toEqual([]);
    expect(svc(c)).toMatchObject({ networks: ['st-back'], networkAliases: { 'st-back': ['app', 'www'] } });
    expect(svc(c, 'st-worker').networkAliases).toEqual({});
  });

  it('warns of an alias that is the service\'s own name or given twice, and drops it', () => {
    const c = compile(stack('aliases: [st-web, www, www]'));
    expect(c.warnings.map((w) => w.path)).toEqual(['services.web.networks.back.aliases[0]', 'services.web.networks.back.aliases[2]']);
    expect(svc(c).networkAliases).toEqual({ 'st-back': ['www'] });
  });

  it.each([
    ['aliases: [db.local]', 'services.web.networks.back.aliases[0]', 'is not a DNS label'],
    ['aliases: [Web]', 'services.web.networks.back.aliases[0]', 'write it in lower case: web'],
    ['aliases: www', 'services.web.networks.back.aliases', 'must be a list'],
  ])('refuses %s', (opts, path, message) => {
    const problems = refused(stack(opts));
    expect(problems.map((p) => p.path)).toEqual([path]);
    expect(problems[0]?.message).toContain(message);
  });

  it('refuses aliases on a replicated-job (a Job has none)', () => {
    const text = stack('aliases: [www]').replace('    image: nginx:1\n    networks:\n      back:', '    image: nginx:1\n    deploy: {mode: replicated-job}\n    networks:\n      back:');
    const problems = refused(text);
    expect(problems.map((p) => p.path)).toEqual(['services.web.networks']);
    expect(problems[0]?.message).toContain('takes no network aliases');
  });
});

describe('configs and secrets at absolute paths (issue 39)', () => {
  const stack = (refs: string) => `services:\n  web:\n    image: nginx:1\n${refs}\nsecrets:\n  pw: {content: pw}\nconfigs:\n  conf: {content: "a = 1"}\n`;

  it('delivers a config at its absolute target (the short form at /<name>, as Compose), with its mode; a secret too', () => {
    const c = compile(stack('    configs: [conf, {source: conf, target: /etc/app/app.conf, mode: 0444}]\n    secrets: [{source: pw, target: /etc/app/pw}]'));
    expect(c.warnings).toEqual([]);
    expect(svc(c).secrets).toEqual([
      { name: 'st-pw', target: '/etc/app/pw', mode: 0o400 },
      { name: 'st-conf', target: '/conf', mode: 0o400 },
      { name: 'st-conf', target: '/etc/app/app.conf', mode: 0o444 },
    ]);
  });

  it.each([
    ['    configs: [{source: conf, target: app.conf}]', 'services.web.configs[0].target', 'is an absolute path in the container'],
    ['    configs: [{source: conf, target: /proc/x}]', 'services.web (as shoal\'s secrets[0].target)', 'which the runtime mounts itself'],
    ['    configs: [{source: conf, target: /etc/app/../x}]', 'services.web (as shoal\'s secrets[0].target)', 'is not an absolute container path'],
    ['    configs: [{source: conf, target: /data}]\n    volumes: [data:/data]', 'services.web (as shoal\'s secrets[0].target)', 'is already the target of'],
    ['    configs: [{source: conf, target: /run/secrets/pw}]\n    secrets: [pw]', 'services.web (as shoal\'s secrets[1].target)', 'is already given'],
  ])('refuses %s', (refs, path, message) => {
    const problems = refused(stack(refs).replace('configs:\n  conf', 'volumes:\n  data: {}\nconfigs:\n  conf'));
    expect(problems.map((p) => p.path)).toEqual([path]);
    expect(problems[0]?.message).toContain(message);
  });
});

describe('secret and config uid/gid (issue 39)', () => {
  const stack = (refs: string, deploy = '') => `services:\n  web:\n    image: nginx:1\n${deploy}${refs}\nsecrets:\n  pw: {content: pw}\nconfigs:\n  conf: {content: "a = 1"}\n`;

  it('gives the delivered file its owner: strings as compose writes them, or numbers; 0 is root\'s and stays unsaid', () => {
    const c = compile(stack('    secrets: [{source: pw, uid: "999", gid: "999", mode: 0400}]\n    configs: [{source: conf, target: /etc/app.conf, uid: 0, gid: 101, mode: 0440}]'));
    expect(c.warnings).toEqual([]);
    expect(svc(c).secrets).toEqual([
      { name: 'st-pw', target: 'pw', mode: 0o400, uid: 999, gid: 999 },
      { name: 'st-conf', target: '/etc/app.conf', mode: 0o440, gid: 101 },
    ]);
  });

  it('a replicated-job\'s files take them too', () => {
    const c = compile(stack('    secrets: [{source: pw, uid: "70"}]', '    deploy: {mode: replicated-job}\n'));
    expect(c.set.jobs[0]?.secrets).toEqual([{ name: 'st-pw', target: 'pw', mode: 0o400, uid: 70 }]);
  });

  it.each([
    ['    secrets: [{source: pw, uid: postgres}]', 'services.web.secrets[0].uid', 'is not a numeric user id'],
    ['    configs: [{source: conf, gid: "-1"}]', 'services.web.configs[0].gid', 'is not a numeric group id'],
    ['    secrets: [{source: pw, gid: "4294967295"}]', 'services.web.secrets[0].gid', '0 to 4294967294'],
  ])('refuses %s', (refs, path, message) => {
    const problems = refused(stack(refs));
    expect(problems.map((p) => p.path)).toEqual([path]);
    expect(problems[0]?.message).toContain(message);
  });
});

describe('ports[].mode (issue 38)', () => {
  it('maps mode ingress and host; unsaid, a replicated service\'s port goes through the mesh and a global one\'s stays on its node', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    ports: [{target: 80, published: 8080, mode: ingress}, {target: 81, published: 8081, mode: host}, "8082:82"]\n  agent:\n    image: nginx:1\n    deploy: {mode: global}\n    ports: ["9100:9100", {target: 9101, published: 9101, mode: ingress}]\n');
    expect(c.warnings).toEqual([]);
    const [web, agent] = [c.set.services.find((s) => s.name.endsWith('web')), c.set.services.find((s) => s.name.endsWith('agent'))];
    expect(web?.ports).toEqual([
      { published: 8080, target: 80, protocol: 'tcp', mode: 'ingress' },
      { published: 8081, target: 81, protocol: 'tcp' },
      { published: 8082, target: 82, protocol: 'tcp', mode: 'ingress' },
    ]);
    expect(agent?.ports).toEqual([{ published: 9100, target: 9100, protocol: 'tcp' }, { published: 9101, target: 9101, protocol: 'tcp', mode: 'ingress' }]);
    expect(web?.networks).toContain('ingress');
    expect(refused('services:\n  web:\n    image: nginx:1\n    ports: [{target: 80, published: 8080, mode: vip}]\n').map((p) => p.path)).toEqual(['services.web.ports[0].mode']);
  });
});

describe('ports[].host_ip (issue 39)', () => {
  it('publishes on one address of the node: short and long syntax, IPv6 in brackets, ranges; all addresses stay unsaid', () => {
    const c = compile('services:\n  web:\n    image: nginx:1\n    ports: ["127.0.0.1:8080:80", "[fd00::1]:53:53/udp", "192.168.1.5:9000-9001:9000-9001", {target: 22, published: 2222, host_ip: 10.0.0.2}, "0.0.0.0:443:443"]\n');
    expect(c.warnings).toEqual([]);
    expect(svc(c).ports).toEqual([
      { published: 8080, target: 80, protocol: 'tcp', hostIp: '127.0.0.1' },
      { published: 53, target: 53, protocol: 'udp', hostIp: 'fd00::1' },
      { published: 9000, target: 9000, protocol: 'tcp', hostIp: '192.168.1.5' },
      { published: 9001, target: 9001, protocol: 'tcp', hostIp: '192.168.1.5' },
      { published: 2222, target: 22, protocol: 'tcp', hostIp: '10.0.0.2' },
      // On every address: through the routing mesh, the default of a replicated service.
      { published: 443, target: 443, protocol: 'tcp', mode: 'ingress' },
    ]);
  });

  it('refuses a host_ip that is not an address', () => {
    const problems = refused('services:\n  web:\n    image: nginx:1\n    ports: [{target: 80, published: 80, host_ip: nas.lan}]\n');
    expect(problems.map((p) => p.path)).toEqual(["services.web (as shoal's ports[0].hostIp)"]);
    expect(problems[0]?.message).toContain('is not an IPv4 or IPv6 address');
  });
});

describe('volumes.<name>.driver_opts (issue 39)', () => {
  const stack = (volume: string, mounts = '["media:/media", {type: volume, source: media, target: /ro, read_only: true}]') =>
    `services:\n  web:\n    image: nginx:1\n    volumes: ${mounts}\n  other:\n    image: nginx:1\n    volumes: ["media:/m"]\nvolumes:\n  media: ${volume}\n`;

  it('gives every mount of the volume its options (NFS, CIFS, tmpfs, bind), numbers read as strings', () => {
    const cases: [string, Record<string, string>][] = [
      ['{driver: local, driver_opts: {type: nfs, o: "addr=10.0.0.5,rw,nfsvers=4", device: ":/export/media"}}', { type: 'nfs', o: 'addr=10.0.0.5,rw,nfsvers=4', device: ':/export/media' }],
      ['{driver_opts: {type: cifs, o: "username=u,password=p,vers=3.0", device: "//nas/media"}}', { type: 'cifs', o: 'username=u,password=p,vers=3.0', device: '//nas/media' }],
      ['{driver_opts: {type: tmpfs, device: tmpfs, o: size=1m}}', { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' }],
      ['{driver_opts: {type: none, o: bind, device: /srv/media}}', { type: 'none', o: 'bind', device: '/srv/media' }],
      ['{driver_opts: {o: "uid=1000", size: 1000}}', { o: 'uid=1000', size: '1000' }],
    ];
    for (const [volume, options] of cases) {
      const c = compile(stack(volume));
      expect(c.warnings, volume).toEqual([]);
      expect(svc(c).mounts, volume).toEqual([
        { type: 'volume', source: 'st_media', target: '/media', readOnly: false, volumeOptions: options },
        { type: 'volume', source: 'st_media', target: '/ro', readOnly: true, volumeOptions: options },
      ]);
      expect(svc(c, 'st-other').mounts, volume).toEqual([{ type: 'volume', source: 'st_media', target: '/m', readOnly: false, volumeOptions: options }]);
    }
  });

  it('leaves a volume without driver_opts as it was (no options: the volume Docker makes on first use)', () => {
    expect(svc(compile(stack('{}'))).mounts[0]).toEqual({ type: 'volume', source: 'st_media', target: '/media', readOnly: false });
  });

  it.each([
    ['{driver_opts: {type: nfs, opts: "addr=1"}}', 'volumes.media.driver_opts.opts', 'is not an option of Docker\'s local volume driver'],
    ['{driver_opts: {type: nfs}}', 'volumes.media.driver_opts', 'gives type without device'],
    ['{driver_opts: {device: ":/export"}}', 'volumes.media.driver_opts', 'gives device without type'],
    ['{driver_opts: {}}', 'volumes.media.driver_opts', 'is empty'],
    ['{driver_opts: [type=nfs]}', 'volumes.media.driver_opts', 'must be a mapping'],
    ['{driver_opts: {type: tmpfs, device: tmpfs, o: [size=1m]}}', 'volumes.media.driver_opts.o', 'must be a string'],
    ['{external: true, driver_opts: {type: tmpfs, device: tmpfs}}', 'volumes.media.driver_opts', 'an external volume is made outside the stack'],
    ['{driver: rexray/ebs, driver_opts: {type: tmpfs, device: tmpfs}}', 'volumes.media.driver', 'is not supported'],
  ])('refuses %s at the volume, not at the services that mount it', (volume, path, message) => {
    const problems = refused(stack(volume));
    expect(problems.map((p) => p.path)).toEqual([path]);
    expect(problems[0]?.message).toContain(message);
  });
});

describe('networks.<net>.ipv4_address (issue 39)', () => {
  const stack = (service: string, network = '{ipam: {config: [{subnet: 10.30.0.0/16}]}}') =>
    `services:\n  db:\n    image: postgres:16\n${service.split('\n').map((l) => `    ${l}`).join('\n')}\nnetworks:\n  back: ${network}\n`;

  it('gives a service of one replica its address on a network with an explicit subnet, or an external one', () => {
    const c = compile(stack('networks: {back: {ipv4_address: 10.30.0.50, aliases: [pg]}}'));
    expect(c.warnings).toEqual([]);
    expect(svc(c, 'st-db').networkAddresses).toEqual({ 'st-back': '10.30.0.50' });
    expect(svc(c, 'st-db').networks).toEqual(['st-back']);
    const ext = compile(stack('networks: {back: {ipv4_address: 10.50.1.9}}', '{external: true, name: lan}'), { networks: new Map([['lan', '10.50.0.0/16']]) });
    expect(svc(ext, 'st-db').networkAddresses).toEqual({ lan: '10.50.1.9' });
    // Services without one are unchanged.
    expect(svc(compile(stack('networks: [back]')), 'st-db').networkAddresses).toEqual({});
  });

  it.each([
    ['networks: {back: {ipv4_address: 10.30.0.50}}', '{}', 'takes its subnet from shoal\'s pool'],
    ['networks: {back: {ipv4_address: 10.31.0.5}}', undefined, 'is not in the subnet 10.30.0.0/16 of network st-back'],
    ['networks: {back: {ipv4_address: 10.30.4.1}}', undefined, 'is a node\'s gateway on the network'],
    ['networks: {back: {ipv4_address: 10.30.0.0}}', undefined, 'is the network\'s own address'],
    ['networks: {back: {ipv4_address: "fd00::5"}}', undefined, 'is not an IPv4 address'],
    ['networks: {back: {ipv4_address: 10.30.0.50}}\ndeploy: {replicas: 2}', undefined, 'the service has 2 replicas'],
    ['networks: {back: {ipv4_address: 10.30.0.50}}\ndeploy: {mode: global}', undefined, 'a global service runs a task on every node'],
    ['networks: {back: {ipv4_address: 10.30.0.50}}\ndeploy: {update_config: {order: start-first}}', undefined, 'updated stop-first'],
    ['networks: {back: {ipv4_address: 10.30.0.50}}\ndeploy: {mode: replicated-job}', undefined, 'replicated-job'],
    ['networks: {back: {ipv4_address: 10.30.0.50}}', '{external: true, name: nowhere}', 'the external network nowhere does not exist'],
  ])('refuses %s at the ipv4_address', (service, network, message) => {
    const problems = refused(stack(service, network));
    expect(problems.map((p) => p.path)).toEqual(['services.db.networks.back.ipv4_address']);
    expect(problems[0]?.message).toContain(message);
  });
});
