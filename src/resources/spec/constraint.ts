// Placement constraints: which nodes a service's tasks may run on.
//
//   node.labels.KEY == value      node.labels.KEY != value      node.labels.KEY in (a, b)
//   node.name == n2               node.name != n2               node.name in (n1, n2)
//   node.id == 7f3a...            (and != / in, as for names)
//   node.platform.os == linux     node.platform.arch != arm64   node.platform.arch in (amd64, arm/v7)
//   node.role == manager          node.role != worker
//
// The platform and role names are Swarm's, so that a Compose file written for Swarm reads the
// same here. The platform is what the node wrote in its record (NodeRecord.platform, Docker's
// names: amd64, arm64, arm/v7); Swarm's uname-style names (x86_64, aarch64, armv7l) are read as
// those. `node.role`: shoal has no managers and workers, only raft voters and learners; a voter
// (which may lead, and holds the CA and cluster keys) is a `manager`, a learner a `worker`.
//
// Parsed once, at apply, into a structured form the scheduler matches without re-parsing. The
// grammar is deliberately small: no quoting, no `not in`, no regular expressions, no `||`. A
// constraint in any other form is refused, never read as something near it.

/** Label keys: letters and digits, with `.`, `_`, `-` and `/` inside (`rack`, `example.com/zone`). */
export const labelKeyPattern = /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?$/;
/** Label values: no spaces, commas or parentheses, so a constraint can name them unquoted. */
export const labelValuePattern = /^[A-Za-z0-9._:/@+-]{0,253}$/;

export type ConstraintAttribute = 'label' | 'name' | 'id' | 'os' | 'arch' | 'role';

/** Swarm's node roles: a voter is a `manager`, a learner a `worker` (see above). */
export type NodeRole = 'manager' | 'worker';
export const nodeRoles: readonly NodeRole[] = ['manager', 'worker'];

/** Operating systems an image index names (Go's GOOS values that Docker uses). */
export const platformOses: readonly string[] = ['aix', 'android', 'darwin', 'freebsd', 'illumos', 'linux', 'netbsd', 'openbsd', 'solaris', 'windows'];
/** CPU architectures an image index names (Go's GOARCH values that Docker uses). */
export const platformArchitectures: readonly string[] = ['386', 'amd64', 'arm', 'arm64', 'loong64', 'mips', 'mips64', 'mips64le', 'mipsle', 'ppc64', 'ppc64le', 'riscv64', 's390x'];
/** Swarm reports `uname -m` names (`docker info`'s Architecture); read them as the index's. */
const architectureAliases: Readonly<Record<string, string>> = {
  x86_64: 'amd64', aarch64: 'arm64', armv7l: 'arm/v7', armv6l: 'arm/v6', armhf: 'arm/v7', i386: '386', i686: '386',
};
export type ConstraintOperator = '==' | '!=' | 'in';

export interface Constraint {
  /** The canonical text, as reasons and `service inspect` show it: `node.labels.role == db`. */
  text: string;
  /** What of the node is compared: one of its labels, its name, its id, its platform's OS or architecture, or its role. */
  attribute: ConstraintAttribute;
  /** The label key when `attribute` is `label`, otherwise null. */
  label: string | null;
  operator: ConstraintOperator;
  /** One value for `==` and `!=`; one or more (sorted, distinct) for `in`. */
  values: string[];
}

/** What a constraint is matched against (a NodeRecord has these). */
export interface ConstraintSubject {
  id: string;
  name: string;
  labels: Readonly<Record<string, string>>;
  /** Absent: not known (a node of an older release), and no platform constraint holds for it. */
  platform?: { os: string; architecture: string; variant?: string };
  /** Absent: not known (the matcher was not told the voters), and no role constraint holds for it. */
  role?: NodeRole;
}

const shape = /^node\.(labels\.([^\s=!]+)|name|id|platform\.os|platform\.arch|role)\s*(==|!=|\s+in\s+)\s*(.*)$/;

const attributes: Readonly<Record<string, ConstraintAttribute>> = { name: 'name', id: 'id', 'platform.os': 'os', 'platform.arch': 'arch', role: 'role' };

export type ConstraintParse = { ok: true; constraint: Constraint } | { ok: false; message: string };

const grammar = 'write node.labels.KEY == value, node.labels.KEY != value, node.labels.KEY in (a, b), or the same with node.name, node.id, node.platform.os, node.platform.arch or node.role';

export function parseConstraint(text: string): ConstraintParse {
  const m = shape.exec(text.trim());
  if (m === null) {
    const alias = /^node\.(hostname|platform\.[A-Za-z0-9_]+|platform\b)/.exec(text.trim())?.[1];
    const hint = alias === 'hostname' ? ' (Swarm\'s node.hostname is node.name here)'
      : alias !== undefined && !/^platform\.(os|arch)$/.test(alias) ? ` (there is no node.${alias}: the platform has node.platform.os and node.platform.arch)` : '';
    return { ok: false, message: `${JSON.stringify(text)} is not a constraint shoal knows${hint}; ${grammar}` };
  }
  const [, subject = '', labelKey, rawOperator = '', rest = ''] = m;
  const operator = rawOperator.trim() as ConstraintOperator;
  if (labelKey !== undefined && !labelKeyPattern.test(labelKey)) {
    return { ok: false, message: `${JSON.stringify(labelKey)} is not a label key (letters, digits, and . _ - / inside)` };
  }
  const raw = operator === 'in' ? parseSet(rest) : [rest.trim()];
  if (raw === null) return { ok: false, message: `${JSON.stringify(text)}: "in" takes a parenthesized list, e.g. in (a, b)` };
  for (const v of raw) {
    if (v === '' || !labelValuePattern.test(v)) {
      return { ok: false, message: `${JSON.stringify(v)} is not a value a constraint can compare (letters, digits, and . _ - : / @ +; no spaces, commas or quotes)` };
    }
  }
  const attribute: ConstraintAttribute = labelKey !== undefined ? 'label' : attributes[subject] ?? 'id';
  const values: string[] = [];
  for (const v of raw) {
    const known = knownValue(attribute, v);
    if (typeof known !== 'string') return { ok: false, message: known.message };
    values.push(known);
  }
  const label = labelKey ?? null;
  const sorted = operator === 'in' ? [...new Set(values)].sort() : values;
  return { ok: true, constraint: { text: formatConstraint(attribute, label, operator, sorted), attribute, label, operator, values: sorted } };
}

/** The value in its canonical spelling, or why the attribute can never have it. */
function knownValue(attribute: ConstraintAttribute, v: string): string | { message: string } {
  switch (attribute) {
    case 'role':
      return (nodeRoles as readonly string[]).includes(v) ? v
        : { message: `${JSON.stringify(v)} is not a node role: write manager (a raft voter) or worker (a learner)` };
    case 'os':
      return platformOses.includes(v) ? v : { message: `${JSON.stringify(v)} is not an operating system an image names (${platformOses.join(', ')})` };
    case 'arch': {
      const canonical = architectureAliases[v] ?? v;
      const [arch = '', variant, extra] = canonical.split('/');
      if (platformArchitectures.includes(arch) && extra === undefined && (variant === undefined || /^v[0-9]{1,2}$/.test(variant))) return canonical;
      return { message: `${JSON.stringify(v)} is not an architecture an image names: write one of ${platformArchitectures.join(', ')}, optionally with a variant (arm/v7), or Swarm's x86_64, aarch64, armv7l` };
    }
    default:
      return v;
  }
}

function parseSet(rest: string): string[] | null {
  const m = /^\((.*)\)$/.exec(rest.trim());
  if (m === null) return null;
  return (m[1] ?? '').split(',').map((s) => s.trim());
}

export function formatConstraint(attribute: ConstraintAttribute, label: string | null, operator: ConstraintOperator, values: readonly string[]): string {
  const subject = attribute === 'label' ? `node.labels.${label ?? ''}` : attribute === 'os' || attribute === 'arch' ? `node.platform.${attribute}` : `node.${attribute}`;
  return operator === 'in' ? `${subject} in (${values.join(', ')})` : `${subject} ${operator} ${values[0] ?? ''}`;
}

/**
 * Whether a node satisfies the constraint. A node without the label does not match `==` or
 * `in`, and does match `!=` (as in Swarm: "not db" includes "no role at all"). A node whose
 * platform or role is not known matches no constraint on it (constraintUnknown says so): it has
 * some platform and role, so "not arm64" cannot be vouched for either.
 */
export function matchesConstraint(c: Constraint, node: ConstraintSubject): boolean {
  if (c.attribute === 'arch') return matchesArchitecture(c, node.platform);
  if (constraintUnknown(c, node)) return false;
  const actual = c.attribute === 'label' ? node.labels[c.label ?? '']
    : c.attribute === 'name' ? node.name : c.attribute === 'id' ? node.id : c.attribute === 'os' ? node.platform?.os : node.role;
  switch (c.operator) {
    case '==': return actual !== undefined && actual === c.values[0];
    case '!=': return actual === undefined || actual !== c.values[0];
    case 'in': return actual !== undefined && c.values.includes(actual);
  }
}

/** Whether the constraint is on something the node has not said (its platform) or the matcher was not told (its role). */
export function constraintUnknown(c: Constraint, node: ConstraintSubject): boolean {
  return ((c.attribute === 'os' || c.attribute === 'arch') && node.platform === undefined) || (c.attribute === 'role' && node.role === undefined);
}

/** `arm` matches every arm variant; `arm/v7` only v7 (or a node that names no variant). */
function matchesArchitecture(c: Constraint, platform: ConstraintSubject['platform']): boolean {
  if (platform === undefined) return false;
  const one = (v: string): boolean => {
    const [arch, variant] = v.split('/');
    return arch === platform.architecture && (variant === undefined || platform.variant === undefined || variant === platform.variant);
  };
  switch (c.operator) {
    case '==': return one(c.values[0] ?? '');
    case '!=': return !one(c.values[0] ?? '');
    case 'in': return c.values.some(one);
  }
}

/**
 * A message when two constraints can never both hold (`role == db` and `role == web`, or
 * `role == db` and `role != db`): such a service could never be placed, so it is refused at
 * apply rather than left pending forever.
 */
export function contradiction(given: readonly Constraint[]): string | null {
  // A node has one of the two roles: "not a worker" is "a manager". Architectures are left out:
  // `arm` and `arm/v7` overlap, so unequal values are no contradiction.
  const constraints = given.filter((c) => c.attribute !== 'arch').map((c) => (c.attribute === 'role' && c.operator === '!=' ? { ...c, operator: '==' as const, values: nodeRoles.filter((r) => r !== c.values[0]) } : c));
  const required = new Map<string, Constraint>();
  for (const c of constraints) {
    if (c.operator !== '==') continue;
    const key = `${c.attribute}:${c.label ?? ''}`;
    const other = required.get(key);
    if (other !== undefined && other.values[0] !== c.values[0]) return `${other.text} and ${c.text} cannot both hold`;
    required.set(key, c);
  }
  for (const c of constraints) {
    const eq = required.get(`${c.attribute}:${c.label ?? ''}`);
    if (eq === undefined) continue;
    const v = eq.values[0] ?? '';
    if ((c.operator === '!=' && c.values[0] === v) || (c.operator === 'in' && !c.values.includes(v))) {
      return `${eq.text} and ${c.text} cannot both hold`;
    }
  }
  return null;
}
