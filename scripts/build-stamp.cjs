// build-stamp.cjs: what a build from source was made of, written to build/nn-arena-build.json
// after it succeeds, so that scripts/install.cjs can keep a build that still matches instead of
// rebuilding (an `npx nn-arena` in a clone runs the install script again):
//   node     the Node ABI (process.versions.modules) and N-API version it was built under;
//   options  the variant (CPU or CUDA and its architectures), PTX, the compilers and flags from
//            the environment;
//   sources  a SHA-256 of every file under csrc/ and of what decides the build rules.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { createHash } = require('node:crypto');

const root = path.resolve(__dirname, '..');
const STAMP = path.join(root, 'build', 'nn-arena-build.json');
// Environment variables that change the compiled code.
const ENV = ['CC', 'CXX', 'LINK', 'CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'NN_ARENA_CUDA_PTX'];

function walk(dir, out) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

function sourcesHash() {
  const h = createHash('sha256');
  const files = [...walk(path.join(root, 'csrc'), []), ...['binding.gyp', 'scripts/find-nvcc.cjs', 'scripts/sources.cjs'].map((f) => path.join(root, f))];
  let addonApi = '';
  try {
    addonApi = require(require.resolve('node-addon-api/package.json', { paths: [root] })).version;
  } catch {
    /* absent */
  }
  h.update(`node-addon-api ${addonApi}\n`);
  for (const f of files) {
    h.update(`${path.relative(root, f).split(path.sep).join('/')}\n`);
    h.update(fs.existsSync(f) ? fs.readFileSync(f) : '');
  }
  return h.digest('hex');
}

/** The stamp a build with these options would get now. plan: { cuda: boolean, archs: string[] }. */
function current(plan) {
  const env = Object.fromEntries(ENV.filter((k) => process.env[k]).map((k) => [k, process.env[k]]));
  return {
    node: { abi: process.versions.modules, napi: process.versions.napi, platform: process.platform, arch: process.env.npm_config_arch || process.arch },
    options: { cuda: plan.cuda, archs: plan.cuda ? plan.archs : [], env },
    sources: sourcesHash(),
  };
}

function read() {
  try {
    return JSON.parse(fs.readFileSync(STAMP, 'utf8'));
  } catch {
    return null;
  }
}

function write(stamp) {
  fs.writeFileSync(STAMP, `${JSON.stringify({ ...stamp, builtAt: new Date().toISOString() }, null, 2)}\n`);
}

/** What differs between the stamp on disk and `now`: [] when the build matches, else the parts
 *  ('node', 'options', 'sources', or 'no stamp'). */
function differences(old, now) {
  if (!old) return ['no stamp'];
  return ['node', 'options', 'sources'].filter((k) => JSON.stringify(old[k]) !== JSON.stringify(now[k]));
}

module.exports = { STAMP, current, read, write, differences };
