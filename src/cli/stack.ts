// shoal stack: compose files deployed as stacks (docs/compose.md). `deploy` reads the files, the
// .env beside the first, and the files they name (env_file, secrets and configs), and sends
// their text to POST /v1/stacks/{name}/deploy, which reads them strictly and applies them all or
// nothing; then it waits for the services as `shoal apply` does. `config` prints the merged,
// interpolated model without a cluster. `ls`, `ps`, `services`, `rm` act on what a stack made.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { imageResolutionSchema, pinnedLine, read, serviceDetailSchema, serviceListSchema, type TaskItem } from './control-api.ts';
import { resolveImageFlag, resolveImageFlagText } from './apply.ts';
import { durationFlag } from './control-args.ts';
import { waitConverged, waitTimeoutDefault } from './converge.ts';
import { fittedTableText, serviceHead, serviceRows, tableText, taskHead, taskRows, terminalColumns } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';
import { compileStack, loadCompose, stackRefusal, type ComposeFile, type Loaded } from '../resources/compose/index.ts';
import { Problems, type Problem } from '../resources/spec/reader.ts';

const enc = encodeURIComponent;

const fileFlags = {
  'compose-file': { type: 'string', short: 'c', multiple: true },
  profile: { type: 'string', multiple: true },
} as const;

const deployHelp = `Usage: shoal stack deploy -c FILE [-c FILE ...] NAME [--profile P ...] [--prune] [--dry-run] [--detach] [--timeout DURATION] [--addr HOST:PORT] [--json]

Creates or updates every resource of stack NAME from compose files (the Compose Specification;
no version: needed). Several -c files are merged in order, by the specification's rules; \${VAR},
\${VAR:-default} and \${VAR:?message} are taken from the environment, then from the .env file beside
the first file; services with profiles run only with --profile (or COMPOSE_PROFILES). Each compose
service becomes the shoal service NAME-SERVICE (its short name resolves on the stack's networks),
each network NAME-NET (a stack has a default network), each secret or config NAME-SECRET.
The files are strict: a field a cluster cannot honour (build, links, a relative bind mount, ...)
refuses the whole stack, every problem named with its path and a hint, and nothing is applied;
a field with no effect and no harm (expose, tty, ...) is accepted with a warning naming it.
Then it waits until every service of the stack has converged, as shoal apply does.
The table of fields is docs/compose.md.

Options:
  -c, --compose-file FILE  a compose file (repeat to merge several, later ones override)
  --profile P              activate a profile (repeat for several)
  --prune                  remove what the stack made before and the files no longer name
  --dry-run                show what would be created, changed (field by field) and removed;
                           change nothing
${resolveImageFlagText(25)}
  --detach                 do not wait for the services to converge
  --timeout DURATION       how long to wait for convergence (default ${waitTimeoutDefault})
${commonFlagsText(25)}

With --json prints {stack, dryRun, rev, services, jobs, networks, secrets, policies, warnings,
skipped, images?, imageWarnings?} and, after waiting, converged: the services' views.
Exit codes: 0 deployed (and converged, unless --detach or --dry-run); 1 refused (each problem is
printed), or a service did not converge; 2 usage error (a file that cannot be read); 3 no node
answered, or the cluster cannot serve right now.`;

const configHelp = `Usage: shoal stack config -c FILE [-c FILE ...] [NAME] [--profile P ...] [--shoal] [--json]

Prints the merged, interpolated compose model, as docker compose config does, with the services
of inactive profiles left out; no cluster is asked. With --shoal (and NAME) prints the shoal spec
documents the stack compiles to instead (new networks' subnets shown as the pool would give them on
an empty cluster). Problems are refused as deploy refuses them.

Options:
  -c, --compose-file FILE  a compose file (repeat to merge several)
  --profile P              activate a profile (repeat for several)
  --shoal                  print the shoal documents (Network, Service) instead
  --json                   JSON instead of YAML
  -h, --help               show this help

Exit codes: 0 printed; 1 the files are refused; 2 usage error.`;

const lsHelp = `Usage: shoal stack ls [--addr HOST:PORT] [--json]

Lists the stacks: how many services, networks and secrets each made, and tasks running of desired.

Options:
${commonFlagsHelp}

With --json prints {items, rev} (GET /v1/stacks).
${clientExitCodes}`;

const psHelp = `Usage: shoal stack ps NAME [--no-trunc] [--addr HOST:PORT] [--json]

Lists the tasks of the stack's services (service, slot, node, desired and observed state, message).

Options:
  --no-trunc         do not cut messages to the terminal's width
${commonFlagsHelp}

${clientExitCodes}`;

const servicesHelp = `Usage: shoal stack services NAME [--addr HOST:PORT] [--json]

Lists the stack's services (as shoal service ls does).

Options:
${commonFlagsHelp}

${clientExitCodes}`;

const rmHelp = `Usage: shoal stack rm NAME [--addr HOST:PORT] [--json]

Removes everything stack NAME made: its services (their tasks are shut down), its jobs, its networks, its
secrets and the firewall policy of its published ports, and nothing else (a network or secret
another service uses is kept, and said). Named volumes stay on the nodes, as docker compose down
leaves them.

Options:
${commonFlagsHelp}

${clientExitCodes}`;

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function readOptional(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

interface Gathered {
  files: ComposeFile[];
  dotEnv: string | undefined;
  /** The variables the files use that the environment has. */
  env: Record<string, string>;
  /** The files they name, by the path as written, in base64. */
  readFiles: Record<string, string>;
  loaded: Loaded;
  problems: Problems;
}

/** Reads the files and what they name, and loads them once here to learn which variables and files to send. */
function gather(composeFiles: readonly string[], profiles: readonly string[]): Gathered {
  if (composeFiles.length === 0) throw new UsageError('missing -c FILE (a compose file)');
  const files = composeFiles.map((f) => ({ path: f, text: readText(f) }));
  const dir = path.dirname(composeFiles[0] ?? '.');
  const dot = readOptional(path.join(dir, '.env'));
  const dotEnv = dot?.toString('utf8');
  const processEnv = process.env as Record<string, string>;
  const problems = new Problems();
  const loaded = loadCompose({ files, env: processEnv, dotEnv, profiles }, problems);
  const env: Record<string, string> = {};
  const take = (n: string): string | undefined => {
    const v = processEnv[n];
    if (v !== undefined) env[n] = v;
    return v;
  };
  for (const n of loaded.used) take(n);
  const readFiles: Record<string, string> = {};
  if (problems.count === 0) {
    try {
      compileStack({
        stack: 'gather', model: structuredClone(loaded.model), lookup: take, networks: new Map(),
        readFile: (p) => {
          const bytes = readOptional(path.resolve(dir, p));
          if (bytes !== undefined) readFiles[p] = bytes.toString('base64');
          return bytes;
        },
      });
    } catch {
      // The node reads the files again and answers the problems; here only what to send matters.
    }
  }
  return { files, dotEnv, env, readFiles, loaded, problems };
}

const outcomeSchema = z.object({
  name: z.string(), outcome: z.string(), change: z.string().optional(), replaces: z.array(z.string()).optional(), fields: z.array(z.string()).optional(),
  changes: z.record(z.string(), z.object({ before: z.unknown(), after: z.unknown() })).optional(), specVersion: z.number().optional(), compose: z.string().optional(),
}).loose();
const problemSchema = z.object({ path: z.string(), message: z.string() });
const deployAnswerSchema = z.object({
  stack: z.string(), dryRun: z.boolean(), rev: z.number().nullable(), services: z.array(outcomeSchema), networks: z.array(outcomeSchema), secrets: z.array(outcomeSchema),
  policies: z.array(outcomeSchema).default([]),
  jobs: z.array(z.object({ name: z.string(), outcome: z.string(), run: z.string().nullable().default(null) }).loose()).default([]),
  warnings: z.array(problemSchema), skipped: z.array(z.string()),
  images: z.array(imageResolutionSchema).optional(), imageWarnings: z.array(z.string()).optional(),
}).loose();
type DeployAnswer = z.infer<typeof deployAnswerSchema>;

function shown(v: unknown): string {
  return JSON.stringify(v) ?? 'null';
}

/** The lines a deploy prints: one per resource, and the fields of each update, before -> after. */
export function deployLines(a: DeployAnswer): string[] {
  const verb = (o: string): string => (a.dryRun && o !== 'unchanged' ? `would be ${o}` : o);
  const lines: string[] = [];
  for (const n of a.networks) lines.push(`network ${n.name}: ${verb(n.outcome)}`);
  for (const s of a.secrets) lines.push(`secret ${s.name}: ${verb(s.outcome)}`);
  for (const p of a.policies) lines.push(`firewall policy ${p.name}: ${verb(p.outcome)}`);
  for (const s of a.services) {
    if (s.outcome !== 'updated') {
      lines.push(`service ${s.name}: ${verb(s.outcome)}`);
      continue;
    }
    const how = s.change === 'replace' ? `a rolling update ${a.dryRun ? 'would replace' : 'replaces'} ${s.replaces?.length ?? 0} task(s)` : 'running tasks are kept';
    lines.push(`service ${s.name}: ${verb('updated')}; ${how}`);
    for (const [field, c] of Object.entries(s.changes ?? {})) lines.push(`  ${field}: ${shown(c.before)} -> ${shown(c.after)}`);
  }
  for (const j of a.jobs) lines.push(`job ${j.name}: ${verb(j.outcome)}${j.run !== null ? `; ${a.dryRun ? 'would run' : 'runs'} now (run ${j.run}; shoal job ps ${j.name})` : ''}`);
  const changed = [...a.networks, ...a.secrets, ...a.policies, ...a.services, ...a.jobs].some((r) => r.outcome !== 'unchanged');
  if (a.dryRun) lines.push(changed ? 'dry run: nothing was changed' : 'dry run: no change');
  return lines;
}

function warningLines(warnings: readonly Problem[], skipped: readonly string[]): string[] {
  return [
    ...warnings.map((w) => `warning: ${w.path}: ${w.message}`),
    ...(skipped.length > 0 ? [`note: left out for their profiles: ${skipped.join(', ')}`] : []),
  ];
}

async function deployCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, ...fileFlags, 'dry-run': { type: 'boolean', default: false }, detach: { type: 'boolean', default: false },
    timeout: { type: 'string' }, prune: { type: 'boolean', default: false }, 'resolve-image': { type: 'string' },
  }, deployHelp);
  if (values.help) return help(deployHelp);
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing the stack NAME' : `one stack NAME, not '${positionals.join(' ')}'`);
  const name = positionals[0] ?? '';
  const timeoutMs = durationFlag(values.timeout, '--timeout', waitTimeoutDefault);
  const addr = resolveAddr(values.addr);
  const g = gather(values['compose-file'] ?? [], values.profile ?? []);
  const { body } = await request(addr, 'POST', `/v1/stacks/${enc(name)}/deploy`, deployAnswerSchema, {
    query: { dryRun: values['dry-run'] ? 'true' : undefined, resolveImage: resolveImageFlag(values['resolve-image']) },
    body: {
      files: g.files, env: g.env, ...(g.dotEnv !== undefined ? { dotEnv: g.dotEnv } : {}), readFiles: g.readFiles,
      profiles: values.profile ?? [], ...(values.prune ? { prune: true } : {}),
    },
    retry: 'safe', onRetry: retryNotice('stack deploy'),
  });
  if (!values.json) {
    for (const l of warningLines(body.warnings, body.skipped)) console.error(l);
    for (const w of body.imageWarnings ?? []) console.error(`warning: ${w}`);
    for (const l of deployLines(body)) console.log(l);
    for (const i of body.images ?? []) {
      const line = pinnedLine(i);
      if (line !== null) console.log(line);
    }
  }
  const wait = !values.detach && !values['dry-run'];
  if (!wait) {
    if (values.json) console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  if (!values.json) console.error('waiting for the services to converge (--detach to return at once)');
  const targets = body.services.filter((s) => s.outcome !== 'removed').map((s) => ({ name: s.name, specVersion: s.specVersion ?? 1 }));
  const views = await waitConverged(targets, { addr, command: 'stack deploy', json: values.json, timeoutMs });
  if (values.json) console.log(JSON.stringify({ ...body, converged: views }, null, 2));
  else for (const v of views) console.log(`${v.name}: converged, ${v.status.running}/${v.status.desired} running`);
  return exitCodes.ok;
}

async function configCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...fileFlags, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false }, shoal: { type: 'boolean', default: false } }, configHelp);
  if (values.help) return help(configHelp);
  if (positionals.length > 1) throw new UsageError(`at most one stack NAME, not '${positionals.join(' ')}'`);
  const g = gather(values['compose-file'] ?? [], values.profile ?? []);
  if (g.problems.count > 0) throw stackRefusal(g.problems.list);
  let out: unknown = g.loaded.model;
  if (!values.shoal) for (const l of warningLines(g.loaded.unset.map((n) => ({ path: 'variables', message: `${n} is not set: read as an empty string` })), g.loaded.skipped)) console.error(l);
  if (values.shoal) {
    const name = positionals[0];
    if (name === undefined) throw new UsageError('--shoal needs the stack NAME (the resources carry it)');
    const dir = path.dirname(g.files[0]?.path ?? '.');
    const c = compileStack({
      stack: name, model: g.loaded.model, lookup: (n) => process.env[n], networks: new Map(), unset: g.loaded.unset,
      readFile: (p) => readOptional(path.resolve(dir, p)),
    });
    for (const l of warningLines(c.warnings, g.loaded.skipped)) console.error(l);
    out = c.documents;
  }
  console.log(values.json ? JSON.stringify(out, null, 2) : values.shoal ? (out as unknown[]).map((d) => stringify(d)).join('---\n') : stringify(out));
  return exitCodes.ok;
}

const stackViewSchema = z.object({
  name: z.string(), rev: z.number(), running: z.number(), desired: z.number(),
  record: z.object({ services: z.array(z.string()), networks: z.array(z.string()), secrets: z.array(z.string()), updatedAt: z.number() }).loose(),
}).loose();
const stackListSchema = z.object({ items: z.array(stackViewSchema), rev: z.number() }).loose();
const stackDetailSchema = z.object({ stack: stackViewSchema, rev: z.number() }).loose();

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, lsHelp);
  if (values.help) return help(lsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await read(resolveAddr(values.addr), '/v1/stacks', stackListSchema, 'stack ls');
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(tableText(['NAME', 'SERVICES', 'NETWORKS', 'SECRETS', 'TASKS'], body.items.map((s) => [s.name, String(s.record.services.length), String(s.record.networks.length), String(s.record.secrets.length), `${s.running}/${s.desired}`])));
  return exitCodes.ok;
}

async function stackServices(addr: string, name: string, command: string): Promise<string[]> {
  const d = await read(addr, `/v1/stacks/${enc(name)}`, stackDetailSchema, command);
  return d.stack.record.services;
}

async function servicesCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, servicesHelp);
  if (values.help) return help(servicesHelp);
  const name = oneStack(positionals);
  const addr = resolveAddr(values.addr);
  const names = new Set(await stackServices(addr, name, 'stack services'));
  const list = await read(addr, '/v1/services', serviceListSchema, 'stack services');
  const items = list.items.filter((s) => names.has(s.name) || s.record.source === `stack:${name}`);
  if (values.json) console.log(JSON.stringify({ items, rev: list.rev }, null, 2));
  else console.log(tableText(serviceHead, serviceRows(items)));
  return exitCodes.ok;
}

async function psCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, 'no-trunc': { type: 'boolean', default: false } }, psHelp);
  if (values.help) return help(psHelp);
  const name = oneStack(positionals);
  const addr = resolveAddr(values.addr);
  const tasks: TaskItem[] = [];
  for (const s of await stackServices(addr, name, 'stack ps')) {
    try {
      tasks.push(...(await read(addr, `/v1/services/${enc(s)}`, serviceDetailSchema, 'stack ps')).tasks);
    } catch (err) {
      if (!(err instanceof Error && 'code' in err && (err as { code: unknown }).code === 'not_found')) throw err;
    }
  }
  if (values.json) console.log(JSON.stringify({ items: tasks }, null, 2));
  else console.log(fittedTableText(taskHead, taskRows(tasks), terminalColumns(), values['no-trunc']));
  return exitCodes.ok;
}

const removedSchema = z.object({
  name: z.string(), removed: z.object({ services: z.array(z.string()), jobs: z.array(z.string()).default([]), networks: z.array(z.string()), secrets: z.array(z.string()), policies: z.array(z.string()).default([]) }),
  kept: z.array(problemSchema), rev: z.number().nullable(),
}).loose();

async function rmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, rmHelp);
  if (values.help) return help(rmHelp);
  const name = oneStack(positionals);
  const { body } = await request(resolveAddr(values.addr), 'DELETE', `/v1/stacks/${enc(name)}`, removedSchema, { retry: 'safe', onRetry: retryNotice('stack rm') });
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  for (const s of body.removed.services) console.log(`service ${s}: removed`);
  for (const j of body.removed.jobs) console.log(`job ${j}: removed`);
  for (const n of body.removed.networks) console.log(`network ${n}: removed`);
  for (const s of body.removed.secrets) console.log(`secret ${s}: removed`);
  for (const p of body.removed.policies) console.log(`firewall policy ${p}: removed`);
  for (const k of body.kept) console.log(`${k.path}: ${k.message}`);
  return exitCodes.ok;
}

function oneStack(positionals: string[]): string {
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing the stack NAME' : `one stack NAME, not '${positionals.join(' ')}'`);
  return positionals[0] ?? '';
}

export const stackGroup: Group = {
  name: 'stack',
  about: 'Compose stacks: the compose files homelabs already have, deployed as shoal services, networks and secrets (docs/compose.md).',
  subcommands: {
    deploy: { summary: 'create or update a stack from compose files (-c), all or nothing; --dry-run, --prune', help: deployHelp, run: deployCommand },
    config: { summary: 'print the merged, interpolated compose model (no cluster needed)', help: configHelp, run: configCommand },
    ls: { summary: 'list stacks', help: lsHelp, run: lsCommand },
    ps: { summary: 'list the tasks of a stack\'s services', help: psHelp, run: psCommand },
    services: { summary: 'list a stack\'s services', help: servicesHelp, run: servicesCommand },
    rm: { summary: 'remove everything a stack made, and nothing else', help: rmHelp, run: rmCommand },
  },
};

export const stackGroupHelp = groupHelp(stackGroup);

export function stackCommand(argv: string[]): Promise<number> {
  return runGroup(stackGroup, argv);
}

