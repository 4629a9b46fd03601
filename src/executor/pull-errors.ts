// Why a pull failed, read from the registry's answer as Docker passes it on (the daemon's error,
// or the error line of its pull stream). A task's start that fails on a pull says the kind first
// (`image_pull_failed: unauthorized: <the registry's answer>; <what to do>`), so `service ps`,
// the console and the first-hour "stop waiting" rule can tell a missing login from a typo, a
// certificate the node does not trust, a rate limit or a registry nothing answers for. Pure.

export type PullFailureKind = 'unauthorized' | 'not_found' | 'tls' | 'rate_limited' | 'unreachable' | 'other';

const rules: ReadonlyArray<[PullFailureKind, RegExp]> = [
  ['rate_limited', /toomanyrequests|too many requests|rate limit|\b429\b/i],
  ['tls', /x509|certificate|tls:|server gave HTTP response to HTTPS client/i],
  ['unauthorized', /unauthorized|no basic auth credentials|authentication required|denied|\b401\b|\b403\b/i],
  ['not_found', /manifest unknown|not found|name unknown|no matching manifest|\b404\b/i],
  ['unreachable', /connection refused|no such host|i\/o timeout|network is unreachable|no route to host|dial tcp|context deadline exceeded/i],
];

/** The kind of a pull failure from the message Docker gave. */
export function pullFailureKind(message: string): PullFailureKind {
  for (const [kind, re] of rules) if (re.test(message)) return kind;
  return 'other';
}

const advice: Readonly<Record<PullFailureKind, (host: string) => string>> = {
  unauthorized: (host) => `log in to the registry: shoal registry login ${host} --username USER --password-stdin (or check the login's user and password)`,
  not_found: () => 'check the image\'s name and tag (or digest): the registry has no such manifest',
  tls: (host) => `the node does not trust the registry's certificate: put its CA in /etc/docker/certs.d/${host}/ca.crt on every node`,
  rate_limited: (host) => `the registry refuses more pulls for now; the task is tried again later (a login to ${host} may raise the limit)`,
  unreachable: (host) => `no registry answered at ${host} from this node; check the host, its port and the node's network`,
  other: () => 'the registry\'s answer is above',
};

/** The text a failed pull is reported with: its kind, the registry's answer, and what to do. */
export function describePullFailure(host: string, message: string): { kind: PullFailureKind; text: string } {
  const kind = pullFailureKind(message);
  return { kind, text: `${kind}: ${message.trim()}; ${advice[kind](host)}` };
}
