// csv.mjs: loadCsv's time against its row count, for one column and for two (issue 51: a
// one-column file was quadratic, each cell's delimiter search running to the end of the text).
// A linear reader keeps ms / 100k rows about flat down each column of the table.
//   npx tsup && node bench/csv.mjs [--rows 20000,80000,160000,400000] [--repeat 3]
//   npx vite-node bench/csv.mjs -- --src      (the sources, without a build)
const args = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const { loadCsv } = await import(new URL(args.includes('--src') ? '../src/io.ts' : '../dist/io.js', import.meta.url).href);
const rowCounts = arg('rows', '20000,80000,160000,400000').split(',').map(Number);
const repeat = Number(arg('repeat', '3'));

function csv(rows, width) {
  const lines = [width === 1 ? 'a' : 'a,b'];
  for (let r = 0; r < rows; r++) lines.push(width === 1 ? `${(r % 2001) - 1000}.5` : `${(r % 2001) - 1000}.5,${r % 7}`);
  return Buffer.from(lines.join('\n') + '\n', 'utf8');
}

loadCsv(csv(1000, 1)); // warm-up
console.log('rows      columns  MB     best s   ms / 100k rows');
for (const width of [1, 2]) {
  for (const rows of rowCounts) {
    const bytes = csv(rows, width);
    let best = Infinity;
    for (let k = 0; k < repeat; k++) {
      const t0 = performance.now();
      const t = loadCsv(bytes);
      best = Math.min(best, (performance.now() - t0) / 1000);
      if (t.rows !== rows || t.columns.length !== width) throw new Error(`read ${t.rows} rows x ${t.columns.length} columns`);
    }
    console.log(
      `${String(rows).padEnd(9)} ${String(width).padEnd(8)} ${(bytes.length / 1e6).toFixed(1).padEnd(6)} ${best.toFixed(3).padEnd(8)} ${((best * 1000 * 100_000) / rows).toFixed(1)}`,
    );
  }
}
