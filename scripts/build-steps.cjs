// build-steps.cjs: the parts of a build from source that scripts/install.cjs runs:
//   missingTools()  the tools node-gyp needs that are not on PATH (named, so that the install
//                   fails with one nn-arena line instead of a stack trace);
//   runGyp()        node-gyp with its whole output in build/nn-arena-build.log and a progress
//                   line per compiled unit on stderr ([k/n], time so far), a heartbeat while one
//                   long unit compiles, and the log's tail when it fails.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const exe = process.platform === 'win32' ? ['.exe', '.cmd', ''] : [''];
function onPath(name) {
  if (!name) return null;
  if (name.includes('/') || name.includes('\\')) return fs.existsSync(name) ? name : null;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    for (const x of exe) {
      const p = path.join(dir, name + x);
      try {
        fs.accessSync(p, fs.constants.X_OK);
        if (fs.statSync(p).isFile()) return p;
      } catch {
        /* next */
      }
    }
  }
  return null;
}

/** Each tool node-gyp needs here and was not found: [{ tool, looked }]. Windows: node-gyp finds
 *  Visual Studio itself, so only Python is checked. */
function missingTools() {
  const first = (v) => (v || '').trim().split(/\s+/)[0];
  const need = [{ tool: 'Python 3 (node-gyp runs gyp with it)', names: [process.env.npm_config_python, process.env.PYTHON, 'python3', 'python'] }];
  if (process.platform !== 'win32') {
    need.push({ tool: 'C++17 compiler', names: [first(process.env.CXX), 'c++', 'g++', 'clang++'] });
    need.push({ tool: 'make', names: process.platform === 'linux' ? ['make'] : ['make', 'gmake'] });
  }
  return need.filter((n) => !n.names.some((x) => onPath(x))).map((n) => ({ tool: n.tool, looked: n.names.filter(Boolean).join(', ') }));
}

const fmt = (ms) => {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
};

/** Runs node-gyp with args in root; resolves to its exit status. units: how many compile steps
 *  to expect (for [k/n]); say: prints one nn-arena line. */
function runGyp(cmd, args, { root, env, log, units, say }) {
  fs.mkdirSync(path.dirname(log), { recursive: true });
  const out = fs.createWriteStream(log, { flags: 'a' });
  out.write(`$ ${[cmd, ...args].join(' ')}\n`);
  const started = Date.now();
  let done = 0;
  let last = Date.now();
  let current = '';
  const beat = setInterval(() => {
    if (Date.now() - last >= 60_000) {
      say(`still building (${fmt(Date.now() - started)}; ${current || 'configure'})`);
      last = Date.now();
    }
  }, 5_000);
  const onLine = (line) => {
    out.write(`${line}\n`);
    // make's quiet lines: "  CXX(target) Release/obj.target/nn_arena/csrc/x.o", "  RULE
    // binding_gyp_nn_arena_target_nvcc_3 Release/obj.target/nn_arena/geni/x.o" (the nvcc rule),
    // "  SOLINK_MODULE(target) ...".
    const m = /^\s+(CXX\(target\)|CC\(target\)|RULE \S*nvcc\S*|SOLINK_MODULE\(target\)|LINK\(target\))\s+(\S+)/.exec(line);
    if (!m) return;
    const what =
      m[1].startsWith('SOLINK') || m[1].startsWith('LINK')
        ? 'link'
        : m[1].startsWith('RULE')
          ? `nvcc ${path.basename(m[2], '.o')}.cu`
          : m[2].replace(/^Release\/obj\.target\/[^/]+\//, '');
    if (what !== 'link') done += 1;
    current = what;
    last = Date.now();
    say(`${what === 'link' ? 'linking' : `[${done}/${units}] ${what}`} (${fmt(Date.now() - started)})`);
  };
  const lines = (stream) => {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (d) => {
      buf += d;
      const parts = buf.split('\n');
      buf = parts.pop();
      parts.forEach(onLine);
    });
    stream.on('end', () => {
      if (buf) onLine(buf);
    });
  };
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    lines(child.stdout);
    lines(child.stderr);
    child.on('error', (e) => {
      out.write(`${e.message}\n`);
    });
    child.on('close', (code, signal) => {
      clearInterval(beat);
      out.end(() => resolve(code ?? (signal ? 1 : 0)));
    });
  });
}

/** The last n lines of the log that say what went wrong (errors first), for a failed build. */
function tail(log, n = 25) {
  let text;
  try {
    text = fs.readFileSync(log, 'utf8');
  } catch {
    return [];
  }
  const all = text.split('\n').filter(Boolean);
  const errors = all.filter((l) => /\berror\b/i.test(l) && !/^gyp (info|verb)/.test(l));
  return (errors.length ? errors : all).slice(-n);
}

module.exports = { missingTools, runGyp, tail, onPath, fmt };
