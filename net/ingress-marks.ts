// The connection mark of the routing mesh (net/ingress-render.ts), in a file of its own so the
// firewall's table (net/firewall-render.ts) can accept what the mesh forwards without the two
// renderers importing each other.

/**
 * Set on the connection (ct mark) by the mesh's DNAT: the firewall's forward chain accepts such
 * connections (the mesh's own table decided, publish rules included), and the mesh's SNAT and
 * MSS clamp apply to them only. A bit apart from the firewall's packet mark (acceptMark).
 */
export const ingressCtMark = 0x0020_0000;
