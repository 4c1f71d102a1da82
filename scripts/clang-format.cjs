#!/usr/bin/env node
// clang-format.cjs: the C++ and CUDA sources in clang-format's layout (.clang-format), with the
// clang-format the package pins (devDependency `clang-format`), so every machine formats alike.
//   node scripts/clang-format.cjs          rewrite the files that differ
//   node scripts/clang-format.cjs --check  list them and exit 1 (npm run lint)
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');
const binary = require('clang-format').getNativeBinary();
const files = execFileSync('git', ['ls-files', 'csrc', 'test/native', 'bench/micro', 'examples'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => /\.(cc|cpp|h|cu|cuh)$/.test(f));
const check = process.argv.includes('--check');
const differ = [];
for (const f of files) {
  const args = check ? ['--style=file', '--dry-run', '--Werror', f] : ['--style=file', '-i', f];
  try {
    execFileSync(binary, args, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch {
    differ.push(f);
  }
}
if (differ.length) {
  console.error(`${check ? "not in clang-format's layout (npm run format)" : 'clang-format failed on'}: ${differ.join(', ')}`);
  process.exit(1);
}
