// Placement constraints: which nodes a service's tasks may run on.
//
//   node.labels.KEY == value      node.labels.KEY != value      node.labels.KEY in (a, b)
//   node.name == n2               node.name != n2               node.name in (n1, n2)
//   node.id == 7f3a...            (and != / in, as for names)
//
// Parsed once, at apply, into a structured form the scheduler matches without re-parsing. The
// grammar is deliberately small: no quoting, no `not in`, no regular expressions, no `||`. A
// constraint in any other form is refused, never read as something near it.

/** Label keys: letters and digits, with `.`, `_`, `-` and `/` inside (`rack`, `example.com/zone`). */
export const labelKeyPattern = /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?$/;
/** Label values: no spaces, commas or parentheses, so a constraint can name them unquoted. */
export const labelValuePattern = /^[A-Za-z0-9._:/@+-]{0,253}$/;

export type ConstraintAttribute = 'label' | 'name' | 'id';
export type ConstraintOperator = '==' | '!=' | 'in';

export interface Constraint {
  /** The canonical text, as reasons and `service inspect` show it: `node.labels.role == db`. */
  text: string;
  /** What of the node is compared: one of its labels, its name, or its id. */
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
}

const shape = /^node\.(labels\.([^\s=!]+)|name|id)\s*(==|!=|\s+in\s+)\s*(.*)$/;

export type ConstraintParse = { ok: true; constraint: Constraint } | { ok: false; message: string };

const grammar = 'write node.labels.KEY == value, node.labels.KEY != value, node.labels.KEY in (a, b), or the same with node.name or node.id';

export function parseConstraint(text: string): ConstraintParse {
  const m = shape.exec(text.trim());
  if (m === null) {
    const alias = /^node\.(hostname|role|platform)/.exec(text.trim())?.[1];
    const hint = alias === 'hostname' ? ' (Swarm\'s node.hostname is node.name here)' : alias !== undefined ? ` (there is no node.${alias}; give nodes a label)` : '';
    return { ok: false, message: `${JSON.stringify(text)} is not a constraint shoal knows${hint}; ${grammar}` };
  }
  const [, subject = '', labelKey, rawOperator = '', rest = ''] = m;
  const operator = rawOperator.trim() as ConstraintOperator;
  if (labelKey !== undefined && !labelKeyPattern.test(labelKey)) {
    return { ok: false, message: `${JSON.stringify(labelKey)} is not a label key (letters, digits, and . _ - / inside)` };
  }
  const values = operator === 'in' ? parseSet(rest) : [rest.trim()];
  if (values === null) return { ok: false, message: `${JSON.stringify(text)}: "in" takes a parenthesized list, e.g. in (a, b)` };
  for (const v of values) {
    if (v === '' || !labelValuePattern.test(v)) {
      return { ok: false, message: `${JSON.stringify(v)} is not a value a constraint can compare (letters, digits, and . _ - : / @ +; no spaces, commas or quotes)` };
    }
  }
  const attribute: ConstraintAttribute = labelKey !== undefined ? 'label' : subject === 'name' ? 'name' : 'id';
  const label = labelKey ?? null;
  const sorted = operator === 'in' ? [...new Set(values)].sort() : values;
  return { ok: true, constraint: { text: formatConstraint(attribute, label, operator, sorted), attribute, label, operator, values: sorted } };
}

function parseSet(rest: string): string[] | null {
  const m = /^\((.*)\)$/.exec(rest.trim());
  if (m === null) return null;
  return (m[1] ?? '').split(',').map((s) => s.trim());
}

export function formatConstraint(attribute: ConstraintAttribute, label: string | null, operator: ConstraintOperator, values: readonly string[]): string {
  const subject = attribute === 'label' ? `node.labels.${label ?? ''}` : `node.${attribute}`;
  return operator === 'in' ? `${subject} in (${values.join(', ')})` : `${subject} ${operator} ${values[0] ?? ''}`;
}

/**
 * Whether a node satisfies the constraint. A node without the label does not match `==` or
 * `in`, and does match `!=` (as in Swarm: "not db" includes "no role at all").
 */
export function matchesConstraint(c: Constraint, node: ConstraintSubject): boolean {
  const actual = c.attribute === 'label' ? node.labels[c.label ?? ''] : c.attribute === 'name' ? node.name : node.id;
  switch (c.operator) {
    case '==': return actual !== undefined && actual === c.values[0];
    case '!=': return actual === undefined || actual !== c.values[0];
    case 'in': return actual !== undefined && c.values.includes(actual);
  }
}

/**
 * A message when two constraints can never both hold (`role == db` and `role == web`, or
 * `role == db` and `role != db`): such a service could never be placed, so it is refused at
 * apply rather than left pending forever.
 */
export function contradiction(constraints: readonly Constraint[]): string | null {
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
