// An ESLint rule that holds every import of the process to scripts/layers.mjs: a relative import
// from one folder into another must be listed for the importing folder.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { folderOf, layers } from './layers.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const layersRule = {
  meta: { type: 'problem', docs: { description: 'imports follow the folder layers of scripts/layers.mjs' }, schema: [] },
  create(context) {
    const file = path.relative(root, context.filename);
    const from = folderOf(file);
    if (from === null || /\.test\.ts$/.test(file)) return {};
    const allowed = layers[from];
    const check = (source) => {
      if (source === null || source === undefined || typeof source.value !== 'string' || !source.value.startsWith('.')) return;
      const target = folderOf(path.relative(root, path.resolve(path.dirname(context.filename), source.value)));
      if (target === null || target === from) return;
      if (allowed === undefined) {
        context.report({ node: source, message: `${from} is not in scripts/layers.mjs: add it with the folders it may import` });
      } else if (!allowed.includes(target)) {
        context.report({ node: source, message: `${from} may not import ${target} (scripts/layers.mjs; docs/architecture.md, "The map"): depend on a port or move the shared piece down` });
      }
    };
    return {
      ImportDeclaration: (n) => check(n.source),
      ExportNamedDeclaration: (n) => check(n.source),
      ExportAllDeclaration: (n) => check(n.source),
      ImportExpression: (n) => check(n.source),
    };
  },
};

export const layersPlugin = { rules: { layers: layersRule } };
