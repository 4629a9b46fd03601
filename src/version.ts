// The software version, one source of truth: package.json's "version". The nodes report it to
// each other in the transport handshake and to clients in GET /v1/cluster; `shoal version`
// prints it. (The bundle in dist/ inlines package.json, so a version change needs a rebuild,
// which `npm ci` and `npm install` run.)

import pkg from '../package.json' with { type: 'json' };

export const softwareVersion: string = pkg.version;
