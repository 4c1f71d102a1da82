#!/usr/bin/env node
// gen-tables.cjs: the TypeScript side of the descriptor tables (and of the native constants the
// planner needs), generated from the C headers that own them, so no table is written twice:
//   NNA_ACTIVATIONS (csrc/include/nn_arena.h) and NNA_LOSSES (csrc/train/losses.h)
//     -> src/native/tables.generated.ts (the planner, spec checks, Trainer, CLI, estimate read it)
//     -> the tables between the `generated:activations` / `generated:losses` markers of README.md
//   NNA_PRECISIONS (csrc/descriptors/precisions.h) -> PRECISION_TABLE (src/native/tables.generated.ts)
//   the arena header's format (nn_arena.h: its #defines, NNA_KINDS, enums and structs, every field's byte
//     offset by C's natural alignment of fixed-width types) and the run codes (enum class Op of
//     csrc/train/train.h, Memory of csrc/core/backend.h) -> FORMAT and RUN_CODES (the same file),
//     which the TS encoder, decoder and checkpoint reader use instead of numbers of their own
//   the optimizers and schedules (one descriptor each in csrc/descriptors/: C++ structs with
//     defaults, ranges and docs, read by the compiler rather than by a pattern here: the built
//     addon's descriptors() hands them over) -> OPTIMIZER_TABLE, SCHEDULE_TABLE, COMMON_PARAMS
// So every table reaches TypeScript one way: this file, at build time.
// Run by `npm run gen` (and by `npm run build:ts`); test/tables.test.ts fails when a committed
// output is not what this script writes from the headers. `--check` writes nothing and exits 1
// when an output is stale.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const read = (p) => fs.readFileSync(path.join(root, p), 'utf8');

/** The rows X(...) of macro `name` in C source `src`, each as its list of arguments. */
function rows(src, name) {
  const start = src.indexOf(`#define ${name}(X)`);
  if (start < 0) throw new Error(`${name} not found`);
  const lines = [];
  for (const line of src.slice(start).split('\n').slice(1)) {
    lines.push(line);
    if (!line.trimEnd().endsWith('\\')) break;
  }
  return [...lines.join('\n').matchAll(/X\(([^)]*)\)/g)].map((m) => m[1].split(',').map((a) => a.trim()));
}

const str = (a) => {
  const m = /^"(.*)"$/.exec(a);
  if (!m) throw new Error(`expected a string literal, got ${a}`);
  return m[1];
};
const int = (a) => {
  if (!/^\d+$/.test(a)) throw new Error(`expected an integer literal, got ${a}`);
  return Number(a);
};
const num = (a) => {
  if (!/^\d+(\.\d+)?$/.test(a)) throw new Error(`expected a number literal, got ${a}`);
  return Number(a);
};
const bits = (a) => (a === '0' ? 0 : int(a));
const INIT = { 0: 'none', NNA_INIT_HE: 'he', NNA_INIT_XAVIER: 'xavier' };

const stripComments = (src) => src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
const cInt = (a) => {
  const m = /^(0x[0-9a-f]+|\d+)u?$/i.exec(a.trim());
  if (!m) throw new Error(`expected an integer literal, got ${a}`);
  return Number(m[1]);
};

/** #define NAME <integer> of `src`. */
function define(src, name) {
  const m = new RegExp(`^#define ${name}\\s+(\\S+)`, 'm').exec(src);
  if (!m) throw new Error(`#define ${name} not found`);
  return cInt(m[1]);
}

/** The enumerators of `enum <head> { ... }` as [name, value] (every one has an explicit value). */
function enumerators(src, head) {
  const at = src.indexOf(`enum ${head}`);
  if (at < 0) throw new Error(`enum ${head} not found`);
  const body = stripComments(src.slice(src.indexOf('{', at) + 1, src.indexOf('}', at)));
  return body
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)
    .map((e) => {
      const m = /^(\w+)\s*=\s*(\S+)$/.exec(e);
      if (!m) throw new Error(`enum ${head}: ${e} has no explicit value`);
      return [m[1], cInt(m[2])];
    });
}

// The C types of the format's structs: fixed-width, so size and alignment are the same on every
// ABI nn-arena builds for (x86-64, arm64); nn_arena.h static_asserts each struct's size.
const C_TYPES = { uint32_t: 4, uint64_t: 8, double: 8, char: 1 };

/** struct `name`'s fields in order as { name, offset, size }, and its size (natural alignment). */
function struct(src, name, counts, known) {
  const at = src.indexOf(`typedef struct ${name} {`);
  if (at < 0) throw new Error(`struct ${name} not found`);
  const body = stripComments(src.slice(src.indexOf('{', at) + 1, src.indexOf(`} ${name};`, at)));
  let offset = 0,
    align = 1;
  const fields = body
    .split(';')
    .map((f) => f.trim())
    .filter(Boolean)
    .map((f) => {
      const m = /^(\w+)\s+(\w+)(?:\[(\w+)\])?$/.exec(f);
      if (!m) throw new Error(`struct ${name}: cannot read field ${f}`);
      const [, type, field, count] = m;
      const t = C_TYPES[type] ? { size: C_TYPES[type], align: C_TYPES[type] } : known[type];
      if (!t) throw new Error(`struct ${name}: unknown type ${type}`);
      const n = count === undefined ? 1 : /^\d+$/.test(count) ? Number(count) : counts[count];
      if (n === undefined) throw new Error(`struct ${name}: unknown count ${count}`);
      offset = Math.ceil(offset / t.align) * t.align;
      align = Math.max(align, t.align);
      const out = { name: field, offset, size: t.size * n };
      offset += out.size;
      return out;
    });
  return { fields, size: Math.ceil(offset / align) * align, align };
}

/** An enumerator's name as TS has it: the prefix dropped, then lower-kebab or camelCase. */
const kebab = (n) => n.toLowerCase().replace(/_/g, '-');
const camel = (n) => n.toLowerCase().replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const lowerFirst = (n) => n[0].toLowerCase() + n.slice(1);
const named = (pairs, prefix, style, skip = []) =>
  Object.fromEntries(
    pairs
      .filter(([n]) => !skip.includes(n))
      .map(([n, v]) => {
        if (!n.startsWith(prefix)) throw new Error(`${n} lacks the prefix ${prefix}`);
        return [style(n.slice(prefix.length)), v];
      }),
  );

/** The names of the kinds (rows [ENUM, code, name] of NNA_KINDS) in NNA_EXTRA_LIKE_KINDS (bits
 *  1u << NNA_<kind>), in kind order. */
function likeKinds(src, kinds) {
  const m = /^#define NNA_EXTRA_LIKE_KINDS (.*)$/m.exec(src);
  if (!m) throw new Error('#define NNA_EXTRA_LIKE_KINDS not found');
  const named = [...m[1].matchAll(/1u << (NNA_\w+)/g)].map((x) => x[1]);
  if (!named.length || named.some((n) => !kinds.some(([e]) => e === n))) throw new Error(`NNA_EXTRA_LIKE_KINDS: cannot read ${m[1]}`);
  return kinds.filter(([e]) => named.includes(e)).map(([, , n]) => n);
}

/** The header's format and the run codes, from the C headers that own them. */
function format() {
  const h = read('csrc/include/nn_arena.h');
  const names = rows(h, 'NNA_KINDS').map(([e, code, name]) => [e, int(code), str(name)]);
  if (names.some(([, v], i) => v !== i)) throw new Error('NNA_KINDS: codes must be 0 .. NNA_KIND_COUNT - 1 in order');
  const kindCount = names.length;
  const counts = { NNA_KIND_COUNT: kindCount, NNA_EXTRA_NAME_BYTES: define(h, 'NNA_EXTRA_NAME_BYTES') };
  const region = struct(h, 'nna_region', counts, {});
  const layer = struct(h, 'nna_layer', counts, { nna_region: region });
  const header = struct(h, 'nna_header', counts, {});
  const extra = struct(h, 'nna_extra', counts, {});
  const opParam = struct(h, 'nna_op_param', counts, {});
  const embedCol = struct(h, 'nna_embed_col', counts, {});
  const offsets = (s) => ({ size: s.size, ...Object.fromEntries(s.fields.filter((f) => !/^reserved/.test(f.name)).map((f) => [f.name, f.offset])) });
  const stats = enumerators(h, 'nna_stat');
  const ops = enumerators(read('csrc/train/train.h'), 'class Op : uint32_t');
  const memory = enumerators(read('csrc/core/backend.h'), 'class Memory : uint32_t');
  return {
    format: {
      magic: define(h, 'NNA_MAGIC'),
      version: define(h, 'NNA_VERSION'),
      maxLayers: define(h, 'NNA_MAX_LAYERS'),
      maxExtras: define(h, 'NNA_MAX_EXTRAS'),
      extraNameBytes: counts.NNA_EXTRA_NAME_BYTES,
      maxModels: define(h, 'NNA_MAX_MODELS'),
      minAlign: define(h, 'NNA_MIN_ALIGN'),
      maxAlign: define(h, 'NNA_MAX_ALIGN'),
      maxSamples: define(h, 'NNA_MAX_SAMPLES'),
      maxCardinality: define(h, 'NNA_MAX_CARDINALITY'),
      flags: {
        compact: define(h, 'NNA_FLAG_COMPACT'),
        zDtypeShift: define(h, 'NNA_FLAG_Z_DTYPE_SHIFT'),
        dDtypeShift: define(h, 'NNA_FLAG_D_DTYPE_SHIFT'),
        regionDtypes: define(h, 'NNA_FLAG_REGION_DTYPES'),
      },
      regionDtypes: named(enumerators(h, 'nna_region_dtype'), 'NNA_REGION_', camel),
      flagsKnown: define(h, 'NNA_FLAGS_KNOWN'),
      dtypes: named(enumerators(h, 'nna_dtype'), 'NNA_', camel),
      orders: named(enumerators(h, 'nna_order'), 'NNA_', kebab),
      kinds: names.map(([, , n]) => n),
      stats: named(stats, 'NNA_STAT_', camel, ['NNA_STATS_COUNT']),
      statsCount: Object.fromEntries(stats).NNA_STATS_COUNT,
      extraRules: named(enumerators(h, 'nna_extra_rule'), 'NNA_EXTRA_', camel),
      extraLike: likeKinds(h, names),
      header: offsets(header),
      layer: offsets(layer),
      region: offsets(region),
      extra: offsets(extra),
      opParam: offsets(opParam),
      embedCol: offsets(embedCol),
    },
    run: { ops: named(ops, '', lowerFirst), memory: named(memory, '', lowerFirst) },
  };
}

/** A plain value as TS source (objects on one line, strings single-quoted). */
const tsValue = (v) =>
  JSON.stringify(v)
    .replace(/"([^"]+)":/g, (_, k) => (/^\w+$/.test(k) ? `${k}: ` : `'${k}': `))
    .replace(/"/g, "'")
    .replace(/,(?=\S)/g, ', ');

function tables() {
  const activations = rows(read('csrc/include/nn_arena.h'), 'NNA_ACTIVATIONS').map(([, code, name, pre, on, init, param, torch]) => {
    if (!(init in INIT)) throw new Error(`unknown init ${init}`);
    const where = bits(on);
    return {
      name: str(name),
      code: int(code),
      keepsPre: int(pre) === 1,
      hidden: (where & 1) !== 0,
      output: (where & 2) !== 0,
      init: INIT[init],
      param: num(param),
      torch: str(torch),
    };
  });
  const ops = rows(read('csrc/include/nn_arena.h'), 'NNA_OPS').map(([, code, name, w, b, torch]) => ({
    name: str(name),
    code: int(code),
    w: int(w),
    bias: int(b) === 1,
    torch: str(torch),
  }));
  const losses = rows(read('csrc/train/losses.h'), 'NNA_LOSSES').map(([, code, name, softmax, logits, smoothing, mean, multi]) => ({
    name: str(name),
    code: int(code),
    softmax: int(softmax) === 1,
    logits: int(logits) === 1,
    smoothing: int(smoothing) === 1,
    meanUnits: int(mean) === 1,
    multilabel: int(multi) === 1,
  }));
  const precisions = rows(read('csrc/descriptors/precisions.h'), 'NNA_PRECISIONS').map(
    ([, code, name, major, work, blas, cpu, cuda, scaled, models, cores]) => ({
      name: str(name),
      code: int(code),
      minMajor: int(major),
      workspace: int(work) === 1,
      needsBlas: int(blas) === 1,
      cpu: int(cpu) === 1,
      cuda: int(cuda) === 1,
      scaled: int(scaled) === 1,
      models: int(models) === 1,
      cores: str(cores),
    }),
  );
  return { activations, ops, losses, precisions, ...format(), ...descriptorTables() };
}

/** The optimizers' and schedules' descriptors as the addon built from csrc/descriptors/ reads them
 *  out (state kinds by code, ranges with Infinity). */
function descriptorTables() {
  let addon;
  try {
    addon = require('node-gyp-build')(root);
  } catch (e) {
    throw new Error(`the optimizer and schedule tables come from the built addon: build it first (npm run build:native): ${e.message}`, { cause: e });
  }
  const d = addon.descriptors();
  return { optimizers: d.optimizers, schedules: d.schedules, common: d.common };
}

/** A JSON-like value as TS source, one entry a line (Infinity kept, which JSON cannot hold). */
const tsData = (list) =>
  `[\n${list.map((o) => `  ${JSON.stringify(o, (_, v) => (v === Infinity ? '__inf__' : v === -Infinity ? '__-inf__' : v)).replace(/"__(-?)inf__"/g, '$1Infinity')},`).join('\n')}\n]`;

function typescript({ activations, ops, losses, precisions, format: f, run, optimizers, schedules, common }) {
  const block = (o) =>
    `{\n${Object.entries(o)
      .map(([k, v]) => `  ${/^\w+$/.test(k) ? k : `'${k}'`}: ${k === 'magic' ? `0x${v.toString(16)}` : tsValue(v)},`)
      .join('\n')}\n}`;
  const row = (o) =>
    `  ${JSON.stringify(o)
      .replace(/"(\w+)":/g, '$1: ')
      .replace(/,(?=\w+: )/g, ', ')
      .replace(/"/g, "'")},`;
  return `// Generated by scripts/gen-tables.cjs from NNA_ACTIVATIONS and the header's format
// (csrc/include/nn_arena.h), NNA_LOSSES (csrc/train/losses.h), NNA_PRECISIONS
// (csrc/descriptors/precisions.h), the run codes (csrc/train/train.h Op, csrc/core/backend.h
// Memory) and the optimizers' and schedules' descriptors (csrc/descriptors/, read out by the
// built addon): do not edit; change the C source and run \`npm run gen\`.
// test/tables.test.ts fails when this file is not what the script writes.

/** The arena header's format (nn_arena.h): its constants and enums, and every struct's size and
 *  field byte offsets (reserved fields left out). */
export const FORMAT = ${block(f)} as const;

/** The codes a run's parameters and an arena's memory kind cross to the native side with. */
export const RUN_CODES = ${block(run)} as const;

/** Every activation (nn_arena.h): its header code; keepsPre: f' needs the pre-activation, which z
 *  then keeps (z holds 2 x batch x units); where it may be used; the weights Trainer.init draws;
 *  param: the default of its parameter (the header's act_param), 0 for none; the torch.nn module. */
export const ACTIVATION_TABLE = [
${activations.map(row).join('\n')}
] as const;

/** Every op (nn_arena.h NNA_OPS): its header code; w: what its w region holds (2 a units x fan_in
 *  matrix, 1 a gain of units, 0 none); bias: whether it has b; the torch.nn module it matches. */
export const OP_TABLE = [
${ops.map(row).join('\n')}
] as const;

/** Every loss (losses.h): its run code; softmax: needs a softmax output layer (else must not have
 *  one); logits: needs an identity output layer; smoothing: takes labelSmoothing; meanUnits: a
 *  row's loss is the mean over its units; multilabel: a row is correct when every label is. */
export const LOSS_TABLE = [
${losses.map(row).join('\n')}
] as const;

/** Every product precision of a float32 run (precisions.h): its run code; minMajor: the compute
 *  capability its tensor cores need (0: any); workspace: its operands are copied into a device
 *  workspace beside the arena; needsBlas: its products run only through cuBLAS; cpu: the CPU
 *  backend runs it (bf16, fp16 emulated: operands rounded as the GPU's); cuda: the CUDA backend
 *  runs it; scaled: it scales the loss dynamically (the Trainer's lossScale); models: arenas of K > 1
 *  models run it; what it runs on. */
export const PRECISION_TABLE = [
${precisions.map(row).join('\n')}
] as const;

/** Every optimizer (csrc/descriptors/, one header each), in code order: its header code; state:
 *  the optimizer-state kinds it keeps per layer, by kind code; folds: no state, so the step folds
 *  into the weight-gradient product; hypers: its hyperparameters, lr first, each with its
 *  default, range and doc. */
export const OPTIMIZER_TABLE = ${tsData(optimizers)} as const;

/** Every learning-rate schedule (csrc/descriptors/schedules.h): its run code and parameters. */
export const SCHEDULE_TABLE = ${tsData(schedules)} as const;

/** The run settings every optimizer reads (clipGradNorm). */
export const COMMON_PARAMS = ${tsData(common)} as const;
`;
}

function markdown({ activations, losses }) {
  const where = (a) => [a.hidden && 'hidden', a.output && 'output'].filter(Boolean).join(', ');
  const act = [
    "| activation | layers | f' from | parameter (default) | PyTorch |",
    '| --- | --- | --- | --- | --- |',
    ...activations
      .filter((a) => a.name !== 'input')
      .map(
        (a) =>
          `| \`${a.name}\` | ${where(a)} | ${a.keepsPre ? 'the pre-activation (z holds 2 x B x units)' : 'the output'} | ${a.param ? `\`leakyReluSlope\` (${a.param})` : '-'} | ${a.torch ? `\`nn.${a.torch}\`` : '-'} |`,
      ),
  ];
  const loss = [
    "| loss | output layer | label smoothing | a row's loss | a row is correct when |",
    '| --- | --- | --- | --- | --- |',
    ...losses.map(
      (l) =>
        `| \`${l.name}\` | ${l.softmax ? 'softmax' : l.logits ? 'identity (logits)' : 'any but softmax'} | ${l.smoothing ? 'yes' : '-'} | ${l.meanUnits ? 'mean over units' : 'sum over units'} | ${l.multilabel ? 'every label matches (logit > 0 vs target > 0.5)' : 'argmax of output and target agree'} |`,
    ),
  ];
  return { activations: act.join('\n'), losses: loss.join('\n') };
}

/** `text` with the block between the markers of `name` replaced by `body`. */
function splice(text, name, body, file) {
  const begin = `<!-- generated:${name} (scripts/gen-tables.cjs) -->`,
    end = `<!-- /generated:${name} -->`;
  const a = text.indexOf(begin),
    b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${file}: markers of ${name} not found`);
  return text.slice(0, a + begin.length) + '\n' + body + '\n' + text.slice(b);
}

/** Every output file and what it should hold. */
function outputs() {
  const t = tables();
  const md = markdown(t);
  let readme = read('README.md');
  readme = splice(readme, 'activations', md.activations, 'README.md');
  readme = splice(readme, 'losses', md.losses, 'README.md');
  return { 'src/native/tables.generated.ts': typescript(t), 'README.md': readme };
}

if (require.main === module) {
  const check = process.argv.includes('--check');
  let stale = [];
  for (const [file, text] of Object.entries(outputs())) {
    const p = path.join(root, file);
    const now = fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
    if (now === text) continue;
    if (check) stale.push(file);
    else fs.writeFileSync(p, text);
  }
  if (stale.length) {
    console.error(`stale (run npm run gen): ${stale.join(', ')}`);
    process.exit(1);
  }
}

module.exports = { outputs, tables };
