// The roles a client API caller can hold, weakest first. A route declares the weakest role that
// may call it; `public` routes need no credential at all (docs/security.md has the table).

export const clientRoles = ['reader', 'operator', 'admin'] as const;
export type ClientRole = (typeof clientRoles)[number];

/** What a route declares in its fastify options: `config: { role }`. */
export type RouteRole = ClientRole | 'public';

const rank: Record<RouteRole, number> = { public: 0, reader: 1, operator: 2, admin: 3 };

/** Whether a caller holding `held` may call a route that needs `needed`. */
export function roleAllows(held: ClientRole, needed: RouteRole): boolean {
  return rank[held] >= rank[needed];
}

export function isClientRole(value: unknown): value is ClientRole {
  return typeof value === 'string' && (clientRoles as readonly string[]).includes(value);
}
