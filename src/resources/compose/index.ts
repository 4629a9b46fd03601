// Compose stacks: compose files read (load.ts), compiled into shoal's resources (compile.ts),
// with the vocabulary of fields honoured, warned and refused (fields.ts).

export { loadCompose, type ComposeFile, type LoadInput, type Loaded, type Model } from './load.ts';
export { stackNamePattern, stackRefusal } from './refusal.ts';
export { compileStack, labelOf, stackSubnetPool, type CompileInput, type Compiled, type StackSecret, type DependsCondition } from './compile.ts';
export { serviceFields, topFields, deployFields, type Verdict } from './fields.ts';
export { interpolate, parseEnvFile, splitCommand } from './interpolate.ts';
