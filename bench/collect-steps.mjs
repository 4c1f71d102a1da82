// collect-steps.mjs: the records of one `scripts/gpu-session.sh table29` call (nn-arena's step
// times, PyTorch graphed, torch.func and the GEMM floor, all measured in that call) gathered into
// one results file, so that bench/results keeps one file per machine instead of the call's loose
// outputs. bench/report.ts renders it into bench/results/README.md.
//   node bench/collect-steps.mjs DIR [--commit SHA] [--command TEXT] [--out FILE]
// DIR holds what table29 wrote: steps.jsonl and spread-*.jsonl (bench/profile-step.mjs --json),
// models-*.json (bench/models.mjs), torch-models-*.json and torch-*.json (bench/torch_ref.py),
// gemm-floor.json (bench/gemm_floor.py). The default FILE is DIR/steps-<gpu>.json.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { headCommit } from './git-commit.mjs';

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const dir = argv.find((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
if (!dir) {
  console.error('usage: node bench/collect-steps.mjs DIR [--commit SHA] [--command TEXT] [--out FILE]');
  process.exit(2);
}

const files = readdirSync(dir).sort();
const json = (f) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
const jsonl = (f) =>
  readFileSync(join(dir, f), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
const pick = (re) => files.filter((f) => re.test(f));

const pytorch = pick(/^torch-(?!models-).*\.json$/).map(json);
const torchFunc = pick(/^torch-models-.*\.json$/).map(json);
const gemmFloor = pick(/^gemm-floor\.json$/).flatMap(json);
// The device's name, from whichever record of the call carries one.
const machine = [...pytorch, ...torchFunc, ...gemmFloor].map((r) => r.device).find(Boolean) ?? 'unknown GPU';
// The call's date: the earliest a record carries (profile-step.mjs rows carry none).
const dates = [...pick(/^models-.*\.json$/).map(json), ...pytorch, ...torchFunc]
  .map((r) => r.date)
  .filter(Boolean)
  .sort();

const result = {
  benchmark: 'steps',
  machine,
  date: dates[0] ?? new Date().toISOString(),
  commit: opt('commit') ?? headCommit(),
  command: opt('command') ?? 'bash scripts/gpu-session.sh table29',
  peer:
    'PyTorch in the same call: full training steps replayed as CUDA graphs (bench/torch_ref.py --modes graph); ' +
    "for K models, torch.func (stack_module_state + vmap over grad, graphed); the GEMM floor: the step's matrix products alone " +
    "through PyTorch's cuBLAS, graphed (bench/gemm_floor.py)",
  nnArena: pick(/^steps\.jsonl$/).flatMap(jsonl),
  spread: pick(/^spread-.*\.jsonl$/).flatMap(jsonl),
  models: pick(/^models-.*\.json$/).map(json),
  pytorch,
  torchFunc,
  gemmFloor,
};
const slug = machine
  .toLowerCase()
  .replace(/[^a-z0-9]+/g, '-')
  .replace(/^-|-$/g, '');
const out = opt('out') ?? join(dir, `steps-${slug}.json`);
writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
console.log(
  `wrote ${out}: ${result.nnArena.length} nn-arena rows, ${result.spread.length} spread runs, ${result.models.length} K-model files, ` +
    `${pytorch.length} PyTorch files, ${torchFunc.length} torch.func files, ${gemmFloor.length} floor rows`,
);
