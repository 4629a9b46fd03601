// /v1/stacks: compose stacks (docs/compose.md). POST /v1/stacks/{name}/deploy takes the compose
// files' text (and the files they name, and the variables they use), reads them with the strict
// compose reader (src/resources/compose/), and writes what they compile to (Services, Networks,
// secrets, and the stack's record) in one transaction, as /v1/apply does: all or nothing, every
// problem at once with its compose path; `?dryRun=true` answers the per-resource plan and writes
// nothing. GET lists stacks and shows one; DELETE removes everything the stack made and nothing
// else.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { Compare } from '../../fsm/index.ts';
import { planApply, type ServiceOutcome } from '../control/apply.ts';
import { nameClashes, planJobApply, type JobOutcome } from '../control/job-apply.ts';
import { checkNetworks, planNetworkApply } from '../control/network-apply.ts';
import { portClaims, prepareIngress } from '../control/ingress-apply.ts';
import { ingressPortsCollection } from '../resources/ingress-ports.ts';
import { deleteChange, merge, putChange, type Change, type Plan } from '../resources/changes.ts';
import { secretsCollection } from '../resources/collections.ts';
import { isFinishedRun, jobRunsCollection, jobsCollection, newRun, type JobRecord } from '../resources/jobs.ts';
import { runsOf } from '../resources/task-owner.ts';
import type * as ComposeModule from '../resources/compose/index.ts';
import type { Compiled } from '../resources/compose/index.ts';
import { stackNamePattern, stackRefusal } from '../resources/compose/refusal.ts';
import { firewallPoliciesCollection, networksCollection, readNetworkState, type NetworkState } from '../resources/network-resources.ts';
import { secretRecordSchema, secretValueBytesMax, writeSecret, type SecretRecord } from '../resources/secrets.ts';
import { changedFields, jsonEqual, refusal } from '../resources/spec/index.ts';
import { Problems, type Problem } from '../resources/spec/reader.ts';
import { stackRecordSchema, stacksCollection, stackSource, type StackRecord } from '../resources/stacks.ts';
import { allDocs, tasksOf, type ControlState, type Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { applyQuery, readOnlyQuery } from './control-schemas.ts';
import { readControl } from './control-views.ts';
import { decideAndWrite, oneTransaction } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { noKeyringYet, sealerFor } from './secrets-routes.ts';
import { validate } from './validate.ts';
import { resolveImages, resolveJobImages, resolveModeDefault, withImagePlatforms, type ImageResolution, type ResolveMode } from './image-resolution.ts';
import { compareText } from '../base/order.ts';

export const stackParams = z.object({
  name: z.string().regex(stackNamePattern, 'must be a stack name (lower-case letters, digits and -, starting with a letter, at most 32 characters)'),
}).strict();

const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const stackDeployBody = z.object({
  /** The compose files, in the order they are merged (later ones override). */
  files: z.array(z.object({ path: z.string().min(1).max(4096), text: z.string() }).strict()).min(1).max(16),
  /** The variables the files use, from the caller's environment (they win over dotEnv). */
  env: z.record(z.string(), z.string()).optional(),
  /** The text of the .env file beside the first compose file. */
  dotEnv: z.string().optional(),
  /** The files the compose files name (env_file, secrets' and configs' file:), by the path as written, in base64. */
  readFiles: z.record(z.string(), z.string().regex(base64, 'must be base64')).optional(),
  /** Profiles to activate (--profile). */
  profiles: z.array(z.string().min(1)).optional(),
  /** Remove what the stack made before and the files no longer name. */
  prune: z.boolean().optional(),
}).strict();

export type StackDeployBody = z.infer<typeof stackDeployBody>;

export interface FieldChange { before: unknown; after: unknown }

export interface StackServiceOutcome extends ServiceOutcome {
  fields?: string[];
  /** For an update, each changed field's value before and after. */
  changes?: Record<string, FieldChange>;
  specVersion: number;
  /** The compose service it comes from. */
  compose?: string;
}

export interface StackResourceOutcome {
  name: string;
  outcome: 'created' | 'updated' | 'unchanged' | 'removed';
}

export interface StackDeployAnswer {
  stack: string;
  dryRun: boolean;
  rev: number | null;
  services: StackServiceOutcome[];
  networks: StackResourceOutcome[];
  secrets: StackResourceOutcome[];
  /** The firewall policy that publishes the stack's ports (STACK-published). */
  policies: StackResourceOutcome[];
  /**
   * Its jobs (compose `deploy.mode: replicated-job`), and the run each created or changed one
   * starts with the deploy (`run`: its id; null when none starts: unchanged, removed, or a run
   * of it still going, which a job that forbids overlaps waits for).
   */
  jobs: (JobOutcome & { compose?: string; run: string | null })[];
  /** Fields accepted with no effect, with their compose paths. */
  warnings: Problem[];
  /** Services left out for their profiles. */
  skipped: string[];
  /** What digest pinning did with each service's image (as /v1/apply answers it); absent when nothing was pinned. */
  images?: ImageResolution[];
  /** Images kept as tags because no registry answered (as /v1/apply's warnings). */
  imageWarnings?: string[];
}

export interface StackView {
  name: string;
  rev: number;
  record: StackRecord;
  /** Tasks of its services that run, of those desired. */
  running: number;
  desired: number;
}

function readStack(store: ApiContext['store'], name: string): Versioned<StackRecord> | undefined {
  const d = store.get(stacksCollection, name);
  const r = d === undefined ? undefined : stackRecordSchema.safeParse(d.doc);
  return d === undefined || r?.success !== true ? undefined : { value: r.data, rev: d.rev };
}

function readSecretRecord(store: ApiContext['store'], name: string): Versioned<SecretRecord> | undefined {
  const d = store.get(secretsCollection, name);
  const r = d === undefined ? undefined : secretRecordSchema.safeParse(d.doc);
  return d === undefined || r?.success !== true ? undefined : { value: r.data, rev: d.rev };
}

/**
 * The compose reader and compiler, loaded by the first deploy (a node serves without them): the
 * deploy route awaits it, then passes it to what compiles, which stays synchronous (the write's
 * decision compiles again and must not wait).
 */
type Compose = typeof ComposeModule;
const loadComposeModule = async (): Promise<Compose> => import('../resources/compose/index.ts');

/** Reads and compiles the files: throws the compose refusal (bad_request, every problem). */
export function compileBody(compose: Compose, stack: string, body: StackDeployBody, nets: NetworkState): Compiled & { skipped: string[] } {
  const { compileStack, loadCompose } = compose;
  const problems = new Problems();
  const env = body.env ?? {};
  const loaded = loadCompose({ files: body.files, env, dotEnv: body.dotEnv, profiles: body.profiles ?? [] }, problems);
  if (problems.count > 0) throw stackRefusal(problems.list);
  const files = body.readFiles ?? {};
  const compiled = compileStack({
    stack, model: loaded.model,
    lookup: (n) => (Object.hasOwn(env, n) ? env[n] : undefined),
    readFile: (p) => (Object.hasOwn(files, p) ? Buffer.from(files[p] ?? '', 'base64') : undefined),
    networks: new Map([...nets.networks.values()].map((n) => [n.value.name, n.value.spec.subnet])),
    unset: loaded.unset,
  });
  return { ...compiled, skipped: loaded.skipped };
}

/** A resource of the stack's name that the stack did not make, and external secrets that are missing. */
function ownershipProblems(
  ctx: ApiContext, state: ControlState, nets: NetworkState, stack: string, c: Compiled, owned: { networks: Set<string>; secrets: Set<string>; policies: Set<string> },
  secretRecords: ReadonlyMap<string, Versioned<SecretRecord> | undefined>,
): Problem[] {
  const problems: Problem[] = [];
  const source = stackSource(stack);
  for (const spec of c.set.services) {
    const svc = state.services.get(spec.name)?.value;
    if (svc !== undefined && svc.source !== source) {
      problems.push({ path: `services.${c.services.get(spec.name) ?? spec.name}`, message: `the service ${spec.name} exists and is not part of stack ${stack}${svc.source === null ? '' : ` (its source is ${svc.source})`}; remove it (shoal service rm ${spec.name}) or deploy the stack under another name` });
    }
  }
  for (const spec of c.set.jobs) {
    const job = state.jobs?.get(spec.name)?.value;
    if (job !== undefined && job.source !== source) {
      problems.push({ path: `services.${c.services.get(spec.name) ?? spec.name}`, message: `the job ${spec.name} exists and is not part of stack ${stack}${job.source === null ? '' : ` (its source is ${job.source})`}; remove it (shoal job rm ${spec.name}) or deploy the stack under another name` });
    }
  }
  for (const p of nameClashes(state, c.set.jobs, c.set.services.map((x) => x.name))) {
    const name = p.path.startsWith('jobs[') ? c.set.jobs[Number(/\d+/.exec(p.path)?.[0])]?.name : c.set.services[Number(/\d+/.exec(p.path)?.[0])]?.name;
    problems.push({ path: `services.${(name !== undefined ? c.services.get(name) : undefined) ?? p.path}`, message: p.message });
  }
  for (const p of c.set.firewallPolicies) {
    if (nets.policies.has(p.name) && !owned.policies.has(p.name)) problems.push({ path: `services (ports: ${p.name})`, message: `the firewall policy ${p.name} exists and is not part of stack ${stack}; remove it (shoal policy rm ${p.name}) or deploy the stack under another name` });
  }
  for (const n of c.set.networks) {
    if (nets.networks.has(n.name) && !owned.networks.has(n.name)) problems.push({ path: `networks (${n.name})`, message: `the network ${n.name} exists and is not part of stack ${stack}; remove it (shoal network rm ${n.name}) or deploy the stack under another name` });
  }
  for (const s of c.secrets) {
    if (secretRecords.get(s.name) !== undefined && !owned.secrets.has(s.name)) problems.push({ path: `secrets (${s.name})`, message: `the secret ${s.name} exists and is not part of stack ${stack}; remove it (shoal secret rm ${s.name}) or deploy the stack under another name` });
  }
  for (const name of c.externalSecrets) {
    if (ctx.store.get(secretsCollection, name) === undefined) problems.push({ path: `secrets (${name})`, message: `no secret named "${name}" (external: true); create it first: shoal secret create ${name} --from-file FILE` });
  }
  return problems;
}

/** Secrets created or updated with the stack (sealed under the cluster key from level 6). */
function planSecrets(ctx: ApiContext, c: Compiled, secretRecords: ReadonlyMap<string, Versioned<SecretRecord> | undefined>, now: number): { changes: Change[]; outcomes: StackResourceOutcome[]; sealedAll: boolean } {
  const changes: Change[] = [];
  const outcomes: StackResourceOutcome[] = [];
  let sealedAll = true;
  for (const s of c.secrets) {
    const prev = secretRecords.get(s.name);
    const seal = sealerFor(ctx, s.name);
    if (seal === null) sealedAll = false;
    if (s.bytes.length > secretValueBytesMax) throw refusal([{ path: `secrets (${s.name})`, message: `is ${s.bytes.length} bytes; a secret holds at most ${secretValueBytesMax}` }]);
    const next = writeSecret(s.name, s.bytes, now, prev?.value, seal);
    if (next === null) outcomes.push({ name: s.name, outcome: 'unchanged' });
    else {
      changes.push(putChange(secretsCollection, s.name, next, prev?.rev ?? null));
      outcomes.push({ name: s.name, outcome: prev === undefined ? 'created' : 'updated' });
    }
  }
  return { changes, outcomes, sealedAll };
}

interface StackPlan { plan: Plan; answer: Omit<StackDeployAnswer, 'dryRun' | 'rev'> }

/** Each service's outcome, with the fields an update changes (before and after) and its spec version. */
function serviceOutcomes(state: ControlState, c: Compiled, serviceWrite: ReturnType<typeof planApply>): StackServiceOutcome[] {
  const records = new Map(serviceWrite.plan.changes.flatMap((ch) => (ch.kind === 'put' ? [[ch.id, ch.doc as { specVersion?: number }] as const] : [])));
  return serviceWrite.services.map((o, i): StackServiceOutcome => {
    const prev = state.services.get(o.name)?.value;
    const spec = c.set.services[i];
    const specVersion = records.get(o.name)?.specVersion ?? prev?.specVersion ?? 1;
    const fields = o.outcome === 'updated' && prev !== undefined && spec !== undefined ? changedFields(prev.spec, spec) : undefined;
    const changes = fields === undefined || prev === undefined || spec === undefined ? undefined
      : Object.fromEntries(fields.map((f) => [f, { before: prev.spec[f], after: spec[f] }]));
    return { ...o, ...(fields !== undefined ? { fields, changes } : {}), specVersion, ...(c.services.has(o.name) ? { compose: c.services.get(o.name) } : {}) };
  });
}

interface PruneInput {
  ctx: ApiContext;
  stack: string;
  state: ControlState;
  nets: NetworkState;
  c: Compiled;
  owned: { networks: Set<string>; secrets: Set<string> };
  named: { services: Set<string>; networks: Set<string>; secrets: Set<string> };
  removedServices: Set<string>;
  prune: boolean;
}

/**
 * The networks and secrets the stack made that the files no longer name: removed with --prune
 * (unless a service outside the stack uses one), kept and still the stack's without. Adds the
 * removals to `changes` and the outcomes; answers what the stack keeps.
 */
function pruneOwned(p: PruneInput, changes: Change[], networkOutcomes: StackResourceOutcome[], secrets: StackResourceOutcome[]): { networks: string[]; secrets: string[] } {
  const { ctx, state, nets, c, owned, named, removedServices } = p;
  const keep = { networks: [...named.networks], secrets: [...named.secrets] };
  const stillUsed = (uses: (spec: TaskRefs) => boolean): boolean =>
    [...state.services.values()].some((s) => !removedServices.has(s.value.name) && !named.services.has(s.value.name) && uses(s.value.spec))
    || [...state.jobs?.values() ?? []].some((j) => j.value.source !== stackSource(p.stack) && uses(j.value.spec))
    || c.set.services.some(uses) || c.set.jobs.some(uses);
  for (const name of owned.networks) {
    if (named.networks.has(name)) continue;
    const n = nets.networks.get(name);
    if (!p.prune || n === undefined || stillUsed((s) => s.networks.includes(name))) {
      if (n !== undefined) keep.networks.push(name);
      continue;
    }
    changes.push(deleteChange(networksCollection, name, n.rev));
    networkOutcomes.push({ name, outcome: 'removed' });
  }
  for (const name of owned.secrets) {
    if (named.secrets.has(name)) continue;
    const s = readSecretRecord(ctx.store, name);
    if (!p.prune || s === undefined || stillUsed((sp) => sp.secrets.some((r) => r.name === name))) {
      if (s !== undefined) keep.secrets.push(name);
      continue;
    }
    changes.push(deleteChange(secretsCollection, name, s.rev));
    secrets.push({ name, outcome: 'removed' });
  }
  return keep;
}

/**
 * The stack's services' images pinned as /v1/apply pins them (image-resolution.ts), asked before
 * the write's decision, which must not wait on the network: the compose files are compiled once
 * here for their images, and again by the decision.
 */
async function pinStackImages(ctx: ApiContext, compose: Compose, stack: string, body: StackDeployBody, mode: ResolveMode): Promise<{ images: ImageResolution[]; warnings: string[] }> {
  const c = compileBody(compose, stack, body, readNetworkState(ctx.store));
  const state = await readControl(ctx, 'linearizable');
  const services = await resolveImages(ctx, c.set.services, state, mode);
  const jobs = await resolveJobImages(ctx, c.set.jobs, state, mode);
  const warnings = [...services.warnings, ...jobs.warnings];
  for (const w of warnings) ctx.node.log.warn(`stack deploy ${stack}: ${w}`);
  return { images: [...services.images, ...jobs.images], warnings };
}

/** The compiled specs with the images pinned for them (one whose image the files no longer name as pinned keeps its own). */
function pinnedSpecs<T extends { name: string; image: string }>(specs: readonly T[], kind: 'service' | 'job', images: readonly ImageResolution[]): T[] {
  return specs.map((s) => {
    const r = images.find((i) => (kind === 'service' ? 'service' in i && i.service === s.name : 'job' in i && i.job === s.name) && i.requested === s.image);
    return r === undefined || r.image === s.image ? s : { ...s, image: r.image };
  });
}

function planDeploy(ctx: ApiContext, compose: Compose, state: ControlState, stack: string, body: StackDeployBody, images: readonly ImageResolution[] = []): StackPlan {
  const nets = readNetworkState(ctx.store);
  const compiled = compileBody(compose, stack, body, nets);
  const c = { ...compiled, set: { ...compiled.set, services: pinnedSpecs(compiled.set.services, 'service', images), jobs: pinnedSpecs(compiled.set.jobs, 'job', images) } };
  const cur = readStack(ctx.store, stack);
  const owned = {
    services: new Set(cur?.value.services ?? []), networks: new Set(cur?.value.networks ?? []), secrets: new Set(cur?.value.secrets ?? []),
    policies: new Set(cur?.value.policies ?? []),
  };
  const source = stackSource(stack);
  const secretRecords = new Map(c.secrets.map((x) => [x.name, readSecretRecord(ctx.store, x.name)]));
  const problems = ownershipProblems(ctx, state, nets, stack, c, owned, secretRecords);
  if (problems.length > 0) throw stackRefusal(problems, c.warnings);
  // The implicit `ingress` network is made with the stack's first ingress port, and owned by no stack.
  const withIngress = prepareIngress(state, nets, c.set);
  checkNetworks(nets, withIngress, state);
  const now = ctx.node.logTimeNow();
  const { changes: secretChanges, outcomes: secrets, sealedAll } = planSecrets(ctx, c, secretRecords, now);
  const netPlan = planNetworkApply(nets, withIngress, now);
  const serviceWrite = planApply(state, c.set.services, now, { source, ...(body.prune === true ? { prune: true } : {}) });
  const jobWrite = planJobRuns(state, c, planJobApply(state, c.set.jobs, now, { source, ...(body.prune === true ? { prune: true } : {}) }), now);
  const compares: Compare[] = [];
  const external = [...new Set(c.externalSecrets)].sort();
  for (const id of external) compares.push({ collection: secretsCollection, id, target: 'exists', cmp: '=', value: true });
  // What the stack made before and the files no longer name: removed with --prune, kept (and
  // still the stack's) without.
  const named = { services: new Set(c.set.services.map((s) => s.name)), networks: new Set(c.set.networks.map((n) => n.name)), secrets: new Set(c.secrets.map((s) => s.name)) };
  const removedServices = new Set(serviceWrite.services.filter((s) => s.outcome === 'removed').map((s) => s.name));
  const pruneChanges: Change[] = [];
  const networkOutcomes: StackResourceOutcome[] = netPlan.networks.map((n) => ({ name: n.name, outcome: n.outcome }));
  const keep = pruneOwned({ ctx, stack, state, nets, c, owned, named, removedServices, prune: body.prune === true }, pruneChanges, networkOutcomes, secrets);
  const policies: StackResourceOutcome[] = netPlan.firewallPolicies.map((p) => ({ name: p.name, outcome: p.outcome }));
  const keptPolicies: string[] = c.set.firewallPolicies.map((p) => p.name);
  for (const name of owned.policies) {
    const p = nets.policies.get(name);
    if (keptPolicies.includes(name) || p === undefined) continue;
    // A stack whose services no longer publish ports has no policy; it goes (it opens nothing more).
    pruneChanges.push(deleteChange(firewallPoliciesCollection, name, p.rev));
    policies.push({ name, outcome: 'removed' });
  }
  const keptServices = [...owned.services].filter((n) => !named.services.has(n) && !removedServices.has(n) && state.services.has(n));
  const namedJobs = new Set(c.set.jobs.map((j) => j.name));
  const removedJobs = new Set(jobWrite.jobs.filter((j) => j.outcome === 'removed').map((j) => j.name));
  const keptJobs = [...state.jobs?.values() ?? []].filter((j) => j.value.source === source && !namedJobs.has(j.value.name) && !removedJobs.has(j.value.name)).map((j) => j.value.name);
  const record: StackRecord = {
    name: stack,
    services: [...new Set([...named.services, ...keptServices])].sort(),
    jobs: [...new Set([...namedJobs, ...keptJobs])].sort(),
    networks: [...new Set(keep.networks)].sort(),
    secrets: [...new Set(keep.secrets)].sort(),
    policies: keptPolicies.sort(),
    dependsOn: c.dependsOn,
    files: body.files.map((f) => f.path),
    createdAt: cur?.value.createdAt ?? now,
    updatedAt: now,
  };
  const servicePlan = { ...serviceWrite.plan, changes: serviceWrite.plan.changes.map((ch) => withImagePlatforms(ch, state, images)) };
  const jobPlan = { ...jobWrite.plan, changes: jobWrite.plan.changes.map((ch) => withImagePlatforms(ch, state, images)) };
  // The records of the ports the services gain, in the same transaction: two racing deploys (or applies) of one port cannot both land.
  const claims = portClaims(state, c.set, (id) => ctx.store.get(ingressPortsCollection, id), now);
  let plan: Plan = merge(merge({ changes: [...secretChanges, ...netPlan.changes], compares: [...netPlan.compares, ...compares] }, servicePlan), jobPlan, claims);
  plan = { changes: [...plan.changes, ...pruneChanges], compares: plan.compares };
  if (plan.changes.length > 0 || cur === undefined || !jsonEqual({ ...cur.value, updatedAt: 0 }, { ...record, updatedAt: 0 })) {
    plan.changes.push(putChange(stacksCollection, stack, record, cur?.rev ?? null));
  }
  if (secretChanges.length > 0) plan = noKeyringYet(plan, sealedAll);
  const services = serviceOutcomes(state, c, serviceWrite);
  return { plan, answer: { stack, services, jobs: jobWrite.jobs, networks: networkOutcomes, secrets, policies, warnings: [...c.warnings, ...jobWrite.warnings], skipped: c.skipped } };
}

/** What a service's and a job's specs share that a stack's networks and secrets are used through. */
interface TaskRefs { networks: readonly string[]; secrets: readonly { name: string }[] }

/**
 * The jobs' writes, and a run for each job the deploy creates or changes (as Swarm runs a job
 * when it is created or updated), in the same transaction. A job with a run still going gets no
 * second one (its concurrency may forbid it, and the deploy must not stop a run): a warning says so.
 */
function planJobRuns(state: ControlState, c: Compiled, w: ReturnType<typeof planJobApply>, now: number): { plan: Plan; jobs: StackDeployAnswer['jobs']; warnings: Problem[] } {
  const written = new Map(w.plan.changes.flatMap((ch) => (ch.kind === 'put' && ch.collection === jobsCollection ? [[ch.id, ch.doc as unknown as JobRecord] as const] : [])));
  const changes: Change[] = [];
  const warnings: Problem[] = [];
  const jobs = w.jobs.map((o) => {
    const compose = c.services.get(o.name);
    const base = { ...o, ...(compose !== undefined ? { compose } : {}) };
    const rec = written.get(o.name);
    if (rec === undefined || (o.outcome !== 'created' && o.outcome !== 'updated')) return { ...base, run: null };
    const active = runsOf(state.runs ?? new Map(), o.name).find((r) => !isFinishedRun(r.value));
    if (active !== undefined) {
      warnings.push({ path: `services.${compose ?? o.name}`, message: `the job's run ${active.value.id} is still ${active.value.state}: no new run starts with this deploy; run it once that one is done (shoal job run ${o.name})` });
      return { ...base, run: null };
    }
    const run = newRun(rec, now, 'manual', now);
    changes.push(putChange(jobRunsCollection, run.id, run, null));
    return { ...base, run: run.id };
  });
  return { plan: { changes: [...w.plan.changes, ...changes], compares: w.plan.compares }, jobs, warnings };
}

function planStackRemove(ctx: ApiContext, state: ControlState, stack: string): { plan: Plan; removed: { services: string[]; jobs: string[]; networks: string[]; secrets: string[]; policies: string[] }; kept: Problem[] } {
  const cur = readStack(ctx.store, stack);
  const source = stackSource(stack);
  const services = [...state.services.values()].filter((s) => s.value.source === source || (cur?.value.services.includes(s.value.name) ?? false));
  const jobs = [...state.jobs?.values() ?? []].filter((j) => j.value.source === source || (cur?.value.jobs.includes(j.value.name) ?? false));
  if (cur === undefined && services.length === 0 && jobs.length === 0) throw new ShoalError('not_found', `no stack named '${stack}'; list them with: shoal stack ls`, { stack });
  const changes: Change[] = [
    ...services.map((s) => deleteChange('shoal.services', s.value.name, s.rev)),
    ...jobs.map((j) => deleteChange(jobsCollection, j.value.name, j.rev)),
  ];
  const gone = new Set([...services, ...jobs].map((s) => s.value.name));
  const others: { value: { name: string; spec: TaskRefs } }[] = [...state.services.values(), ...state.jobs?.values() ?? []].filter((s) => !gone.has(s.value.name));
  const kept: Problem[] = [];
  const nets = readNetworkState(ctx.store);
  const removed = { services: services.map((s) => s.value.name).sort(), jobs: jobs.map((j) => j.value.name).sort(), networks: [] as string[], secrets: [] as string[], policies: [] as string[] };
  for (const name of cur?.value.policies ?? []) {
    const p = nets.policies.get(name);
    if (p === undefined) continue;
    changes.push(deleteChange(firewallPoliciesCollection, name, p.rev));
    removed.policies.push(name);
  }
  for (const name of cur?.value.networks ?? []) {
    const n = nets.networks.get(name);
    if (n === undefined) continue;
    const users = others.filter((s) => s.value.spec.networks.includes(name)).map((s) => s.value.name);
    if (users.length > 0) {
      kept.push({ path: `networks (${name})`, message: `kept: ${users.join(', ')} (not of the stack) use it` });
      continue;
    }
    changes.push(deleteChange(networksCollection, name, n.rev));
    removed.networks.push(name);
  }
  for (const name of cur?.value.secrets ?? []) {
    const s = readSecretRecord(ctx.store, name);
    if (s === undefined) continue;
    const users = others.filter((o) => o.value.spec.secrets.some((r) => r.name === name)).map((o) => o.value.name);
    if (users.length > 0) {
      kept.push({ path: `secrets (${name})`, message: `kept: ${users.join(', ')} (not of the stack) use it` });
      continue;
    }
    changes.push(deleteChange(secretsCollection, name, s.rev));
    removed.secrets.push(name);
  }
  if (cur !== undefined) changes.push(deleteChange(stacksCollection, stack, cur.rev));
  return { plan: { changes, compares: [] }, removed, kept };
}

function viewOf(state: ControlState, d: Versioned<StackRecord>): StackView {
  let running = 0;
  let desired = 0;
  for (const name of d.value.services) {
    const svc = state.services.get(name)?.value;
    if (svc === undefined) continue;
    desired += svc.spec.mode === 'global' ? tasksOf(state, name).filter((t) => t.value.desired === 'running').length : svc.spec.replicas ?? 0;
    running += tasksOf(state, name).filter((t) => t.value.desired === 'running' && state.statuses.get(t.value.id)?.value.state === 'running').length;
  }
  return { name: d.value.name, rev: d.rev, record: d.value, running, desired };
}

export const stackRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/stacks/:name/deploy', { config: { role: 'operator' } }, async (req): Promise<StackDeployAnswer> => {
    const v = validate({ params: [stackParams, req.params], query: [applyQuery, req.query], body: [stackDeployBody, req.body] });
    const compose = await loadComposeModule();
    const pinned = await pinStackImages(ctx, compose, v.params.name, v.body, v.query.resolveImage ?? resolveModeDefault);
    const extra = {
      ...(pinned.images.some((i) => i.outcome !== 'unpinned') ? { images: pinned.images } : {}),
      ...(pinned.warnings.length > 0 ? { imageWarnings: pinned.warnings } : {}),
    };
    if (v.query.dryRun === 'true') {
      const state = await readControl(ctx, 'linearizable');
      const p = planDeploy(ctx, compose, state, v.params.name, v.body, pinned.images);
      if (p.plan.changes.length > 0) oneTransaction(p.plan);
      return { dryRun: true, rev: null, ...p.answer, ...extra };
    }
    const w = await decideAndWrite(ctx, req, `deploying stack ${v.params.name}`, (state) => planDeploy(ctx, compose, state, v.params.name, v.body, pinned.images));
    return { dryRun: false, rev: w.rev, ...w.answer, ...extra };
  });

  app.get('/v1/stacks', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const items: StackView[] = [];
    for (const d of allDocs(ctx.store, stacksCollection)) {
      const r = stackRecordSchema.safeParse(d.doc);
      if (r.success) items.push(viewOf(state, { value: r.data, rev: d.rev }));
    }
    return { items: items.sort((a, b) => compareText(a.name, b.name)), rev: state.revision };
  });

  app.get('/v1/stacks/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [stackParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const d = readStack(ctx.store, v.params.name);
    if (d === undefined) throw new ShoalError('not_found', `no stack named '${v.params.name}'; list them with: shoal stack ls`, { stack: v.params.name });
    return { stack: viewOf(state, d), rev: state.revision };
  });

  app.delete('/v1/stacks/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [stackParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing stack ${v.params.name}`, (state) => {
      const p = planStackRemove(ctx, state, v.params.name);
      return { plan: p.plan, answer: { removed: p.removed, kept: p.kept } };
    });
    return { name: v.params.name, ...w.answer, rev: w.rev };
  });
};
