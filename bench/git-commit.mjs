// git-commit.mjs: the commit a bench ran on, recorded in its results file so that a figure can be
// traced to its code. null where the tree is not a git checkout (a copy of the tree sent to a GPU
// machine): pass --commit to the bench that takes it, or fill the field in when committing.
// bench/machine.ts does the same for `npm run bench` (bundled TypeScript cannot import this file).
import { execFileSync } from 'node:child_process';

export function headCommit() {
  const git = (...a) => execFileSync('git', a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const sha = git('rev-parse', '--short', 'HEAD');
    // Changed tracked files mean the figures are not quite that commit's.
    return git('status', '--porcelain', '--untracked-files=no') ? `${sha}+uncommitted` : sha;
  } catch {
    return null;
  }
}
