// The Compose vocabulary as shoal reads it: every field of the Compose Specification, each either
// honoured (mapped in compile.ts), warned (accepted: it has no effect in a cluster and does no
// harm; the warning names it), or refused with the reason and what to write instead. A field in
// none of these tables is unknown and refused with "did you mean". docs/compose.md is this
// table for people; a test checks they agree.

export type Verdict = { kind: 'honoured' } | { kind: 'warned'; reason: string } | { kind: 'refused'; reason: string };

const honoured: Verdict = { kind: 'honoured' };
const warned = (reason: string): Verdict => ({ kind: 'warned', reason });
const refused = (reason: string): Verdict => ({ kind: 'refused', reason });

const noSpecYet = (what: string): Verdict => refused(`shoal's Service has no ${what} yet; remove it (docs/compose.md lists what is honoured)`);
const namespaces = refused('a task shares no namespace with another container: its tasks may run on any node; remove it');

export const serviceFields: Readonly<Record<string, Verdict>> = {
  image: honoured, command: honoured, entrypoint: honoured, environment: honoured, env_file: honoured, user: honoured,
  ports: honoured, volumes: honoured, devices: honoured, cap_add: honoured, cap_drop: honoured, privileged: honoured,
  network_mode: honoured, networks: honoured, healthcheck: honoured, stop_signal: honoured, stop_grace_period: honoured,
  restart: honoured, logging: honoured, secrets: honoured, configs: honoured, deploy: honoured, depends_on: honoured,
  profiles: honoured, container_name: honoured, cpus: honoured, mem_limit: honoured, mem_reservation: honoured, scale: honoured,
  // Issue 39: the Service's container settings (src/resources/spec/container-settings.ts).
  working_dir: honoured, hostname: honoured, init: honoured, read_only: honoured, shm_size: honoured, tmpfs: honoured, extra_hosts: honoured,
  dns: honoured, dns_search: honoured, dns_opt: honoured, ulimits: honoured, sysctls: honoured, labels: honoured,
  expose: warned('informational: every port of a task is open to the services on its networks'),
  stdin_open: warned('a task has no terminal attached; it has no effect'),
  tty: warned('a task has no terminal attached; it has no effect'),
  pull_policy: warned('each node pulls the image when it does not have it'),
  attach: warned('shoal collects every task\'s logs (shoal service logs)'),
  develop: warned('a development-time setting (compose watch); it has no effect in a cluster'),
  build: refused('a cluster runs images: build and push the image to a registry the nodes can pull from, then name it in image:'),
  links: refused('service names already resolve on the stack\'s networks (db resolves to the db service); remove links'),
  external_links: refused('containers outside the stack are not on its networks; put the service on a shared external network instead'),
  volumes_from: refused('the tasks may run on other nodes than the container it names: share a named volume instead'),
  extends: refused('write the fields out, or put the shared part in a file given first with -c (files are merged in order)'),
  ipc: namespaces, pid: namespaces, uts: namespaces, userns_mode: namespaces,
  cgroup: refused('the runtime places each task in its own cgroup; remove it'),
  cgroup_parent: refused('the runtime places each task in its own cgroup; remove it'),
  domainname: noSpecYet('domain name'),
  group_add: noSpecYet('supplementary groups'),
  security_opt: noSpecYet('security options'),
  oom_score_adj: noSpecYet('OOM score'),
  oom_kill_disable: noSpecYet('OOM-kill switch'),
  pids_limit: noSpecYet('process limit'),
  mem_swappiness: noSpecYet('swappiness'),
  memswap_limit: noSpecYet('swap limit'),
  cpu_shares: noSpecYet('CPU shares (use deploy.resources.reservations.cpus)'),
  cpu_quota: noSpecYet('CPU quota (use deploy.resources.limits.cpus)'),
  cpu_period: noSpecYet('CPU period (use deploy.resources.limits.cpus)'),
  cpu_count: noSpecYet('CPU count (use deploy.resources.limits.cpus)'),
  cpu_percent: noSpecYet('CPU percent (use deploy.resources.limits.cpus)'),
  cpu_rt_runtime: noSpecYet('real-time CPU runtime'),
  cpu_rt_period: noSpecYet('real-time CPU period'),
  cpuset: noSpecYet('CPU set'),
  blkio_config: noSpecYet('block I/O limits'),
  storage_opt: noSpecYet('storage options'),
  device_cgroup_rules: noSpecYet('device cgroup rules (name each device in devices:)'),
  gpus: noSpecYet('GPU requests'),
  runtime: noSpecYet('OCI runtime choice'),
  isolation: noSpecYet('isolation technology'),
  credential_spec: refused('a Windows container setting; shoal runs Linux containers'),
  mac_address: refused('a task\'s address on a network is allocated by shoal; remove it'),
  platform: refused('each node pulls the image for its own platform; to choose nodes, use deploy.placement.constraints with node.platform.arch (or .os)'),
  post_start: noSpecYet('lifecycle hooks'),
  pre_stop: noSpecYet('lifecycle hooks'),
  annotations: noSpecYet('annotations'),
  label_file: refused('label files are not read yet; write the labels under labels: (a mapping or a list of KEY=VALUE)'),
  use_api_socket: refused('the Docker API socket of a node is not handed to workloads; mount /var/run/docker.sock as a bind volume if that is meant'),
  provider: refused('a provider service runs on the machine of the CLI, not in a cluster'),
  models: refused('AI models are not a cluster resource here'),
};

export const topFields: Readonly<Record<string, Verdict>> = {
  version: honoured, name: honoured, services: honoured, networks: honoured, volumes: honoured, secrets: honoured, configs: honoured,
  include: refused('give each file with -c instead (they are merged in order)'),
  models: refused('AI models are not a cluster resource here'),
};

export const deployFields: Readonly<Record<string, Verdict>> = {
  mode: honoured, replicas: honoured, placement: honoured, resources: honoured, update_config: honoured, rollback_config: honoured,
  restart_policy: honoured, endpoint_mode: honoured,
  labels: honoured,
};
