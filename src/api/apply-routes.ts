// POST /v1/apply: Service, Network, FirewallPolicy and Job specs (decoded documents, or the text of a YAML or JSON file) through the
// strict parser, then planApply (src/control/apply.ts): per service created, updated (scale or a
// rolling replace, with the tasks it replaces) or unchanged. All or nothing: a spec with any
// problem refuses the whole apply with every problem at once, and the write is one transaction,
// a compare-and-set on every record the plan read, decided again when they changed meanwhile.
// `?dryRun=true` answers the same outcomes and writes nothing.

import type { FastifyPluginAsync } from 'fastify';
import { planApply, type ApplyOptions, type ServiceOutcome } from '../control/apply.ts';
import { principalOf } from './write-path.ts';
import { merge } from '../resources/changes.ts';
import { checkNetworks, planNetworkApply, type ResourceOutcome } from '../control/network-apply.ts';
import { ingressWarnings, portClaims, prepareIngress } from '../control/ingress-apply.ts';
import { ingressPortsCollection } from '../resources/ingress-ports.ts';
import { readNetworkState } from '../resources/network-resources.ts';
import type { ServiceRecord } from '../resources/records.ts';
import { missingSecretProblems, secretExistsCompares } from '../resources/secrets.ts';
import { secretsCollection } from '../resources/collections.ts';
import { changedFields, parseSpecObjects, parseSpecs, refusal, type ServiceSpec, type SpecSet } from '../resources/spec/index.ts';
import type { ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { applyBody, applyQuery } from './control-schemas.ts';
import { oneTransaction, decideAndWrite } from './control-write.ts';
import { readControl } from './control-views.ts';
import { validate } from './validate.ts';
import { nameClashes, planJobApply, type JobOutcome } from '../control/job-apply.ts';
import { jobTaskSpec, jobsCollection } from '../resources/jobs.ts';
import { resolveImages, resolveJobImages, resolveModeDefault, withImagePlatforms, type ImageResolution } from './image-resolution.ts';

export interface ApplyOutcome extends ServiceOutcome {
  /** The spec fields that differ, for an update. */
  fields?: string[];
  /** The service's specVersion once applied (what it would be, for a dry run). */
  specVersion: number;
}

export interface ApplyAnswer {
  dryRun: boolean;
  /** The revision of the write; null for a dry run or when nothing changed. */
  rev: number | null;
  services: ApplyOutcome[];
  /** Network and FirewallPolicy documents: created, updated or unchanged (network-apply.ts). */
  networks: ResourceOutcome[];
  firewallPolicies: ResourceOutcome[];
  /** Job documents: created, updated (its fields) or unchanged (control/job-apply.ts). */
  jobs: JobOutcome[];
  /** What was done with each service's image (digest pinning); absent when every tag was left as written. */
  images?: ImageResolution[];
  /** What the apply did not do but did not fail for (a tag that could not be pinned, an ingress port no node opens). */
  warnings?: string[];
}

function readSpecs(body: { documents?: unknown[] | undefined; text?: string | undefined; format?: 'yaml' | 'json' | undefined }): SpecSet {
  return body.text !== undefined ? parseSpecs(body.text, body.format ?? 'yaml') : parseSpecObjects(body.documents ?? []);
}

/** The caller's compare-and-set on service records (expectRevs): refused, not retried. */
function checkExpected(state: ControlState, expectRevs: Record<string, number> | undefined): void {
  for (const [name, rev] of Object.entries(expectRevs ?? {})) {
    const cur = state.services.get(name);
    if (cur?.rev === rev) continue;
    throw new ShoalError('revision_mismatch', `service ${name} is ${cur === undefined ? 'gone' : `at rev ${cur.rev}`}, not at rev ${rev} as expected: it changed since it was read; read it again and retry`, {
      service: name, expectedRev: rev, currentRev: cur?.rev ?? null,
    });
  }
}

/** planApply with what each outcome means for people: the fields changed and the version it ends at. */
function plan(ctx: ApiContext, state: ControlState, set: SpecSet, opts: ApplyOptions): { written: ReturnType<typeof planApply>; services: ApplyOutcome[]; networks: ResourceOutcome[]; firewallPolicies: ResourceOutcome[]; jobs: JobOutcome[] } {
  const specs: readonly ServiceSpec[] = set.services;
  const jobTasks = set.jobs.map(jobTaskSpec);
  const missing = [
    ...missingSecretProblems(specs, (name) => ctx.store.get(secretsCollection, name) !== undefined),
    ...missingSecretProblems(jobTasks, (name) => ctx.store.get(secretsCollection, name) !== undefined).map((p) => ({ ...p, path: p.path.replace(/^services/, 'jobs') })),
    ...nameClashes(state, set.jobs, specs.map((s) => s.name)),
  ];
  if (missing.length > 0) throw refusal(missing);
  // Networks first: a service may name a network only once it exists, or in the same apply.
  const nets = readNetworkState(ctx.store);
  // Ingress ports claimed twice are refused; the implicit `ingress` network joins the apply when needed.
  const withIngress = prepareIngress(state, nets, set);
  checkNetworks(nets, withIngress, state);
  const netPlan = planNetworkApply(nets, withIngress, ctx.node.logTimeNow());
  const serviceWrite = planApply(state, specs, ctx.node.logTimeNow(), opts);
  // The secrets the specs name must still exist when the write applies (a removal may race it).
  if (serviceWrite.plan.changes.length > 0) serviceWrite.plan.compares.push(...secretExistsCompares(specs));
  // A job of a new service's name created meanwhile refuses the write.
  for (const o of serviceWrite.services) if (o.outcome === 'created') serviceWrite.plan.compares.push({ collection: jobsCollection, id: o.name, target: 'exists', cmp: '=', value: false });
  const jobWrite = planJobApply(state, set.jobs, ctx.node.logTimeNow(), opts);
  if (jobWrite.plan.changes.length > 0) jobWrite.plan.compares.push(...secretExistsCompares(jobTasks));
  // The records of the ports the services gain, in the same transaction: two racing applies of one port cannot both land.
  const claims = portClaims(state, set, (id) => ctx.store.get(ingressPortsCollection, id), ctx.node.logTimeNow());
  const written = { ...serviceWrite, plan: merge({ changes: netPlan.changes, compares: netPlan.compares }, serviceWrite.plan, jobWrite.plan, claims) };
  const records = new Map(written.plan.changes.flatMap((c) => (c.kind === 'put' ? [[c.id, c.doc as unknown as ServiceRecord] as const] : [])));
  const services = written.services.map((o, i): ApplyOutcome => {
    const cur = state.services.get(o.name)?.value;
    const spec = specs[i];
    const specVersion = records.get(o.name)?.specVersion ?? cur?.specVersion ?? 1;
    return { ...o, ...(o.outcome === 'updated' && cur !== undefined && spec !== undefined ? { fields: changedFields(cur.spec, spec) } : {}), specVersion };
  });
  return { written, services, networks: netPlan.networks, firewallPolicies: netPlan.firewallPolicies, jobs: jobWrite.jobs };
}

export const applyRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/apply', { config: { role: 'operator' } }, async (req): Promise<ApplyAnswer> => {
    const v = validate({ query: [applyQuery, req.query], body: [applyBody, req.body] });
    let specs = readSpecs(v.body);
    const opts: ApplyOptions = {
      ...(v.body.source !== undefined ? { source: v.body.source } : {}), ...(v.body.prune === true ? { prune: true } : {}),
      ...(v.body.force === true ? { force: { by: principalOf(req) } } : {}),
    };
    // Registries are asked before the write's decision, which must not wait on the network.
    const current = await readControl(ctx, 'linearizable');
    const mode = v.query.resolveImage ?? resolveModeDefault;
    const pinned = await resolveImages(ctx, specs.services, current, mode);
    // Jobs' images too: every run of a job spec version runs the same build.
    const pinnedJobs = await resolveJobImages(ctx, specs.jobs, current, mode);
    const images = [...pinned.images, ...pinnedJobs.images];
    // Ingress ports no node would open (no node runs the routing mesh): accepted, but said.
    const warnings = [...pinned.warnings, ...pinnedJobs.warnings, ...ingressWarnings(current, specs)];
    const extra = {
      ...(images.some((i) => i.outcome !== 'unpinned') ? { images } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
    for (const w of warnings) ctx.node.log.warn(`apply: ${w}`);
    specs = { ...specs, services: pinned.specs, jobs: pinnedJobs.specs };
    if (v.query.dryRun === 'true') {
      const state = await readControl(ctx, 'linearizable');
      checkExpected(state, v.body.expectRevs);
      const { written, services, networks, firewallPolicies, jobs } = plan(ctx, state, specs, opts);
      // Refuses what the write would refuse (too many records for one transaction).
      if (written.plan.changes.length > 0) oneTransaction(written.plan);
      return { dryRun: true, rev: null, services, networks, firewallPolicies, jobs, ...extra };
    }
    const w = await decideAndWrite(ctx, req, 'apply', (state) => {
      checkExpected(state, v.body.expectRevs);
      const { written, services, networks, firewallPolicies, jobs } = plan(ctx, state, specs, opts);
      const changes = written.plan.changes.map((c) => withImagePlatforms(c, state, images));
      return { plan: { ...written.plan, changes }, answer: { services, networks, firewallPolicies, jobs } };
    });
    return { dryRun: false, rev: w.rev, ...w.answer, ...extra };
  });
};
