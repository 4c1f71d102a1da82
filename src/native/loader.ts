// loader.ts: finds and loads the native addon with node-gyp-build, which looks in this order:
//   1. build/Release (or build/Debug): a binary built here from source ('local'); it always wins;
//   2. prebuilds/<platform>-<arch>/: the binaries shipped in the npm package ('prebuilt').
// The package ships two prebuilds for linux-x64 (scripts/prebuild.cjs):
//   node.napi.glibc.node  CPU only; the one node-gyp-build itself picks (its most specific name);
//   cuda.napi.glibc.node  CUDA (runtime linked statically: needs only the NVIDIA driver).
// The CUDA one is tried when an NVIDIA driver is visible, and the CPU one is the fallback when it
// fails to load. NN_ARENA_VARIANT=cpu|cuda chooses; NN_ARENA_PREBUILD=<dir> (node-gyp-build)
// loads from another package root.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArenaError, OptionError } from '../core/errors.js';

export interface LoadedAddon<T = unknown> {
  addon: T;
  /** 'local': built here from source (build/Release); 'prebuilt': shipped in the package. */
  variant: 'prebuilt' | 'local';
  /** Whether the binary holds the CUDA backend. */
  flavor: 'cpu' | 'cuda';
  /** The file loaded, relative to the package root. */
  path: string;
  /** Why this binary: one line. */
  reason: string;
}

/** src/ and dist/ both sit one level below the package root; the bench's bundles
 *  (bench/dist/) two levels. */
export function packageRoot(): string {
  const here = typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
  const up = join(here, '..');
  return existsSync(join(up, 'package.json')) ? up : join(up, '..');
}

/** An NVIDIA driver seems installed here (Linux device files; WSL's GPU device). */
export function nvidiaDriverVisible(): boolean {
  return ['/proc/driver/nvidia/version', '/dev/nvidiactl', '/dev/dxg'].some((p) => existsSync(p));
}

/** Refuses a Node older than package.json's `engines.node` (">=20.10": the addon's N-API
 *  calls, the pure finalizer among them, and the library's own syntax need it). */
export function checkNodeVersion(version: string = process.versions.node, engines: string = enginesNode()): void {
  const min = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(engines.trim());
  if (!min) throw new ArenaError('INTERNAL', `package.json engines.node '${engines}' is not of the form >=X.Y.Z`);
  const want = min.slice(1).map((x) => Number(x ?? 0));
  const have = version
    .replace(/^v/, '')
    .split('.')
    .map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if ((have[i] ?? 0) > want[i]!) return;
    if ((have[i] ?? 0) < want[i]!) {
      throw new ArenaError('NODE_TOO_OLD', `nn-arena needs Node ${engines} (package.json engines); this is Node ${version}: install a newer one`);
    }
  }
}

function enginesNode(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
}

let loaded: LoadedAddon | undefined;
let failure: ArenaError | undefined;

export function loadAddon<T = unknown>(): LoadedAddon<T> {
  if (loaded) return loaded as LoadedAddon<T>;
  if (failure) throw failure;
  try {
    checkNodeVersion();
    loaded = find();
    return loaded as LoadedAddon<T>;
  } catch (e) {
    failure = e instanceof ArenaError ? e : new ArenaError('NO_ADDON', String((e as Error)?.message ?? e), { cause: e });
    throw failure;
  }
}

function find(): LoadedAddon {
  const root = packageRoot();
  const req = createRequire(join(root, 'package.json'));
  const rel = (p: string) => relative(root, p).split(sep).join('/');
  let first: string;
  try {
    first = (req('node-gyp-build') as { resolve(dir: string): string }).resolve(root);
  } catch (e) {
    throw new ArenaError(
      'NO_ADDON',
      `no nn-arena binary for ${process.platform}-${process.arch} (Node ${process.versions.node}): none is prebuilt for this platform and none was built here; ` +
        'build one with `npm rebuild nn-arena` (needs a C++ compiler, make and Python; nvcc for CUDA; see the README, Install)',
      { cause: e },
    );
  }
  const load = (file: string) => {
    try {
      return req(file) as { cudaInfo(): { built: boolean } };
    } catch (e) {
      throw new ArenaError(
        'NO_ADDON',
        `the nn-arena binary ${rel(file)} could not be loaded: ${(e as Error).message.split('\n')[0]}; rebuild it with \`npm rebuild nn-arena\``,
        { cause: e },
      );
    }
  };
  if (/[\\/]build[\\/](Release|Debug)[\\/][^\\/]+$/.test(first)) {
    const addon = load(first);
    const flavor = addon.cudaInfo().built ? 'cuda' : 'cpu';
    return { addon, variant: 'local', flavor, path: rel(first), reason: `built from source, ${flavor === 'cuda' ? 'with CUDA' : 'CPU only'}` };
  }
  const env = process.env.NN_ARENA_VARIANT;
  if (env !== undefined && env !== '' && env !== 'cpu' && env !== 'cuda') {
    throw new OptionError('BAD_OPTION', 'NN_ARENA_VARIANT', env, "must be 'cpu' or 'cuda'");
  }
  const cudaFile = readdirSync(dirname(first)).find((f) => f.startsWith('cuda.') && f.endsWith('.node'));
  const driver = nvidiaDriverVisible();
  const wantCuda = env ? env === 'cuda' : driver;
  let fallback = '';
  if (wantCuda && cudaFile) {
    const file = join(dirname(first), cudaFile);
    try {
      return {
        addon: load(file),
        variant: 'prebuilt',
        flavor: 'cuda',
        path: rel(file),
        reason: env ? 'NN_ARENA_VARIANT=cuda' : 'an NVIDIA driver is installed here',
      };
    } catch (e) {
      if (env === 'cuda') throw e;
      fallback = `; the CUDA one failed to load: ${(e as Error).message}`;
    }
  }
  const why = env === 'cpu' ? 'NN_ARENA_VARIANT=cpu' : !cudaFile ? 'no CUDA prebuild for this platform' : !driver ? 'no NVIDIA driver here' : 'CPU fallback';
  return { addon: load(first), variant: 'prebuilt', flavor: 'cpu', path: rel(first), reason: `${why}${fallback}` };
}

/** The file name node-gyp-build gives a prebuild of each flavor (scripts/prebuild.cjs writes them). */
export const prebuildName = { cpu: 'node.napi.glibc.node', cuda: 'cuda.napi.glibc.node' } as const;
