// fastify's schema compilers, replaced: shoal's routes validate their input with zod
// (src/api/validate.ts) and declare no fastify JSON schema, so fastify's defaults (Ajv with its
// formats for validation, fast-json-stringify for serialisation) would only take memory and
// start-up time: fastify loads both when the instance is built, whether a route uses them or
// not (issue 45, bench/RESULTS.md "Footprint levers"). The bundle (scripts/bundle.mjs) leaves
// them out. A route that declares a `schema` fails when it is registered, saying why, instead of
// silently going unvalidated.

import type { FastifyServerOptions } from 'fastify';

function refuse(kind: 'validation' | 'serialisation', where: { method?: string; url?: string }): never {
  throw new Error(
    `route ${where.method ?? '?'} ${where.url ?? '?'} declares a fastify JSON schema for ${kind}; shoal compiles none: `
    + 'validate the input with zod in the handler (src/api/validate.ts) and leave `schema` out of the route options',
  );
}

/** The `schemaController` option of the API's fastify instance. */
export const noJsonSchemaCompilers: NonNullable<FastifyServerOptions['schemaController']> = {
  compilersFactory: {
    buildValidator: () => (route) => refuse('validation', route),
    buildSerializer: () => (route) => refuse('serialisation', route),
  },
};
