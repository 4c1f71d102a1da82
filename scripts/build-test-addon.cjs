// build-test-addon.cjs (`npm run build:test-addon`; vitest's global setup runs it before the
// tests): builds build/Release/nn_arena_test.so, the test- and bench-only native functions
// (test/native/, binding.gyp's nn_arena_test; never shipped, never built by npm install), in the
// build/ that scripts/install.cjs made, with the options its stamp records (CPU-only or CUDA and
// its architectures, compilers and flags), so that make compiles only what changed and the
// library's own build is left as it is. Configures first where build/ does not know the target
// yet (no build here, or one configured before the target existed).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const stamp = require('./build-stamp.cjs');
const { runGyp, tail, fmt } = require('./build-steps.cjs');
const { nodeGyp, nodedirArgs } = require('./node-gyp.cjs');
const { sources } = require('./sources.cjs');

const root = path.resolve(__dirname, '..');
const log = path.join(root, 'build', 'nn-arena-test-build.log');
const say = (s) => process.stderr.write(`nn-arena test addon: ${s}\n`);

async function main() {
  const built = stamp.read();
  const env = { ...process.env, ...(built ? built.options.env : {}) };
  const cuda = built ? built.options.cuda : !!require('./find-nvcc.cjs').locate();
  if (built && !cuda) env.NN_ARENA_CUDA = '0';
  if (built && cuda) env.NN_ARENA_CUDA_ARCH = built.options.archs.join(';');
  const configured = fs.existsSync(path.join(root, 'build', 'nn_arena_test.target.mk'));
  const [cmd, ...pre] = nodeGyp(root);
  const args = [...pre, ...(configured ? [] : ['configure']), 'build', 'nn_arena_test', '-j', 'max', ...nodedirArgs()];
  fs.mkdirSync(path.dirname(log), { recursive: true });
  fs.writeFileSync(log, '');
  const units = sources('test-common').length + sources(cuda ? 'test-cuda' : 'test-absent').length;
  const started = Date.now();
  let compiled = false;
  const status = await runGyp(cmd, args, {
    root,
    env,
    log,
    units,
    say: (s) => {
      compiled = true;
      say(s);
    },
  });
  if (status !== 0) {
    for (const l of tail(log)) say(`  ${l}`);
    say(`the build failed: the whole output is in ${log}`);
    return status;
  }
  if (compiled) say(`built build/Release/nn_arena_test.so (${cuda ? 'CUDA' : 'CPU-only'}) in ${fmt(Date.now() - started)}`);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    say(e.message);
    process.exitCode = 1;
  },
);
