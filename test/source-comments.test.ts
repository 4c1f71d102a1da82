// source-comments.test.ts: no comment in csrc/ or src/ holds a measured figure. A comment says
// why the code is so; what was measured (a time, a rate, a GPU's name, a profiler's reading)
// goes stale with the next change, so it lives in docs/cuda.md ("Measured figures behind the
// code's choices") with its machine and date. Sizes that are part of a rule ("2^25
// multiply-adds", "16 units", "a 2 KiB copy") are not figures and stay.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..');
const SOURCE = /\.(?:c|cc|cpp|cu|cuh|h|hpp|cjs|mjs|js|ts)$/;

interface CommentLine {
  line: number;
  text: string;
}

/** The comment text of a C++ / CUDA / TypeScript source, a line at a time (1-based): `//` to the
 *  end of its line, and each line of a block comment. String, character and template literals and
 *  regular expressions are stepped over, so a `//` inside one is not taken for a comment. */
function commentLines(src: string): CommentLine[] {
  const out: CommentLine[] = [];
  let line = 1;
  let i = 0;
  let last = ''; // the last character of code before i that is not white space
  while (i < src.length) {
    const c = src[i] ?? '';
    const next = src[i + 1];
    if (c === '\n') {
      ++line;
      ++i;
      continue;
    }
    if (c === '/' && next === '/') {
      const end = src.indexOf('\n', i);
      const stop = end < 0 ? src.length : end;
      out.push({ line, text: src.slice(i + 2, stop) });
      i = stop;
      continue;
    }
    if (c === '/' && next === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? src.length : end;
      src
        .slice(i + 2, stop)
        .split('\n')
        .forEach((text, k) => out.push({ line: line + k, text }));
      for (let k = i; k < stop; ++k) if (src[k] === '\n') ++line;
      i = stop + 2;
      last = '/';
      continue;
    }
    if (c === '"' || c === "'" || c === '`' || (c === '/' && regexMayStart(last, src, i))) {
      // A literal: to its closing character (an escape skips one). A string, character or regular
      // expression ends at its line's end at the latest; a template literal may span lines.
      const close = c;
      let inClass = false; // inside a regular expression's [...]
      let k = i + 1;
      for (; k < src.length; ++k) {
        const d = src[k];
        if (d === '\\') {
          ++k;
          continue;
        }
        if (d === '\n') {
          if (close !== '`') break;
          ++line;
          continue;
        }
        if (close === '/' && d === '[') inClass = true;
        else if (close === '/' && d === ']') inClass = false;
        else if (d === close && !inClass) break;
      }
      i = k < src.length && src[k] !== '\n' ? k + 1 : k;
      last = close;
      continue;
    }
    if (!/\s/.test(c)) last = c;
    ++i;
  }
  return out;
}

/** Whether a `/` at i begins a regular expression rather than a division: after an operator, an
 *  opening bracket, a separator, or a keyword such as `return`. */
function regexMayStart(last: string, src: string, i: number): boolean {
  if (src[i + 1] === '/' || src[i + 1] === '*') return false;
  if (last === '' || '(,=:[!&|?{};+-*%<>~^'.includes(last)) return true;
  return /\b(?:return|typeof|case|do|else|in|of|new|delete|void|throw|yield|await)\s*$/.test(src.slice(Math.max(0, i - 12), i));
}

// A number (or range of numbers) followed by a unit of time or of a rate.
const NUMBER = String.raw`\d+(?:[.,]\d+)*(?:\s*(?:-|to)\s*~?\d+(?:[.,]\d+)*)?`;
const TIME = new RegExp(String.raw`(?<![\w.])~?${NUMBER}\s*(?:us|µs|μs|ms|ns)\b`, 'g');
const RATE = new RegExp(String.raw`(?<![\w.])~?${NUMBER}\s*(?:[KMGTP]i?B\/s|[GTP]FLOP(?:\/s|S|s))(?![\w])`, 'g');
// What a measured run says: a speed-up against another, the GPU it ran on, a profiler's reading.
const RELATIVE = /(?<![\w.])\d+(?:\.\d+)?\s*(?:x|%)\s+(?:faster|slower|longer|shorter)\b/g;
const MACHINE = /\b(?:G?H100|G?H200|A100|B200)\b/g;
const PROFILER = /\b(?:ncu|nsys|Nsight)\b/g;

/** The measured figures in one line of comment text (empty where there are none). A setting's
 *  interval ("sampled every 0.2 ms") is a rule, not a measurement. */
function measuredFigures(text: string): string[] {
  const found: string[] = [];
  for (const re of [TIME, RATE]) {
    for (const m of text.matchAll(re)) {
      if (/\bevery\s*$/.test(text.slice(0, m.index))) continue;
      found.push(m[0].trim());
    }
  }
  for (const re of [RELATIVE, MACHINE, PROFILER]) for (const m of text.matchAll(re)) found.push(m[0]);
  return found;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.isFile() && SOURCE.test(e.name) ? [p] : [];
  });
}

describe('measured figures stay out of source comments', () => {
  it('reads comments, not code or literals', () => {
    const src = [
      'const a = "// 5 ms, not a comment"; // a comment',
      "const b = '/* 6 us */'; const re = /\\/\\/ 7 ms/; /* block",
      '   on two lines */ const t = `// 8 ms',
      ' still the template`; x = y / 2; // z / w',
      "char q = '\"'; // after a quote character",
    ].join('\n');
    expect(commentLines(src)).toEqual([
      { line: 1, text: ' a comment' },
      { line: 2, text: ' block' },
      { line: 3, text: '   on two lines ' },
      { line: 4, text: ' z / w' },
      { line: 5, text: ' after a quote character' },
    ]);
  });

  it('flags times, rates, speed-ups, GPUs and profiler readings', () => {
    for (const [text, figures] of [
      ['took 12.8 us (ncu)', ['12.8 us', 'ncu']],
      ['waiting about 0.1-0.3 ms for the host', ['0.1-0.3 ms']],
      ['(~10 us)', ['~10 us']],
      ['2809-2849 us against 2371-2384', ['2809-2849 us']],
      ['~1.5 ns an element', ['~1.5 ns']],
      ['4096x4 at 55.5 TFLOP/s', ['55.5 TFLOP/s']],
      ['the link at 24.3 GB/s', ['24.3 GB/s']],
      ['made the step 38% slower', ['38% slower']],
      ['1.6x faster than before', ['1.6x faster']],
      ['not faster on the H100', ['H100']],
      ['bf16 on the H200', ['H200']],
    ] as const)
      expect(measuredFigures(text), text).toEqual(figures);
  });

  it('leaves the sizes and counts of a rule alone', () => {
    for (const text of [
      'a run of up to 2^25 multiply-adds runs inline',
      'output layers of up to 16 units, 8 rows a block',
      'a 2 KiB cudaMemcpyAsync and a 64 MiB fetch',
      'cudaMemGetInfo, sampled every 0.2 ms through the run',
      "printed (ms from the run's start, per stream)",
      'Host <-> device rates in GB/s',
      'params (us) and the 4x4 tile, 2x the warps',
      'the thread pool of 16 cores; 1e-5 in float32',
    ])
      expect(measuredFigures(text), text).toEqual([]);
  });

  it('finds none in csrc/ or src/', () => {
    const files = [...sources(join(ROOT, 'csrc')), ...sources(join(ROOT, 'src'))];
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const f of files) {
      for (const { line, text } of commentLines(readFileSync(f, 'utf8'))) {
        const figures = measuredFigures(text);
        if (figures.length) found.push(`${relative(ROOT, f)}:${line}: ${figures.join(', ')}: ${text.trim()}`);
      }
    }
    // Move each to docs/cuda.md ("Measured figures behind the code's choices"), with its machine,
    // date and commit, and let the comment give the reason without the number.
    expect(found).toEqual([]);
  });
});
