// The routing mesh's names in the spec vocabulary (docs/network.md, "Ingress").
//
// Every task of a service with an ingress port joins the network `ingress`: the mesh forwards a
// connection arriving at any node to the task's address there, over the overlay. The network is
// made at the first apply that needs it, with the subnet below, unless a Network of that name is
// applied first (to choose another subnet).

/** The implicit network every task with an ingress port joins. */
export const ingressNetworkName = 'ingress';

/** Its subnet when shoal makes it: /24 slices, one per node (as Docker Swarm's ingress is 10.0.0.0/24, a less common block). */
export const ingressSubnetDefault = '10.255.0.0/16';
