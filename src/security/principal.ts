// Who a client is: the name its certificate or token carries (client-certs.ts, the API's bearer tokens).

/**
 * A principal is printed in audit records and log lines and written into a distinguished name:
 * a safe alphabet, and never `node:...`, which names the nodes themselves.
 */
const PRINCIPAL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export function isValidPrincipal(principal: string): boolean {
  return PRINCIPAL_PATTERN.test(principal) && !principal.startsWith('node');
}

export const principalRule = "1 to 64 of A-Z, a-z, 0-9, '.', '_', '@' and '-', starting with a letter or digit, and not starting with 'node'";
