#!/usr/bin/env node
// node-gyp.cjs: node-gyp as nn-arena runs it, offline: with --nodedir set to the headers that
// ship with the running Node itself (<prefix>/include/node: the official tarballs, the npm
// registry's node-linux-* packages, Debian's nodejs), node-gyp never downloads headers. An
// explicit --nodedir or npm_config_nodedir wins. Used by scripts/install.cjs, and by a package
// that builds against nn-arena's header (bin `nn-arena-gyp`: `nn-arena-gyp rebuild`, see
// docs/embedding.md).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');

/** node-gyp's entry: npm's own (npm_config_node_gyp), else one installed beside nn-arena or the
 *  package being built, else `node-gyp` on PATH. */
function nodeGyp(cwd = process.cwd()) {
  const candidates = [process.env.npm_config_node_gyp];
  for (const from of [root, cwd]) {
    try {
      candidates.push(require.resolve('node-gyp/bin/node-gyp.js', { paths: [from] }));
    } catch {
      /* not there */
    }
  }
  const js = candidates.find((p) => p && fs.existsSync(p));
  return js ? [process.execPath, js] : ['node-gyp'];
}

/** The folder holding this Node's own headers (include/node/node_api.h), or null. */
function ownHeaders() {
  const prefix = path.resolve(path.dirname(fs.realpathSync(process.execPath)), '..');
  return fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : null;
}

/** ['--nodedir=<prefix>'] unless the caller or npm chose one; [] when Node has no headers here
 *  (node-gyp then downloads them: say so in the README's offline note). */
function nodedirArgs(args = []) {
  if (args.some((a) => a.startsWith('--nodedir')) || process.env.npm_config_nodedir) return [];
  const dir = ownHeaders();
  return dir ? [`--nodedir=${dir}`] : [];
}

module.exports = { nodeGyp, nodedirArgs, ownHeaders };

if (require.main === module) {
  const args = process.argv.slice(2);
  const [cmd, ...pre] = nodeGyp();
  const r = spawnSync(cmd, [...pre, ...args, ...nodedirArgs(args)], { stdio: 'inherit' });
  if (r.error) {
    process.stderr.write(`nn-arena-gyp: could not run node-gyp: ${r.error.message}\n`);
    process.exit(1);
  }
  process.exit(r.status ?? 1);
}
