// export-onnx.mjs: train in nn-arena, export the network to ONNX and to safetensors, run the
// ONNX file with ONNX Runtime (npm install onnxruntime-node) and check it against predict().
// Run: node examples/export-onnx.mjs
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { Arena, planLayout, Trainer } from 'nn-arena';
import { saveOnnx, saveSafetensors } from 'nn-arena/io';
import { loadMnist } from 'nn-arena/tools';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-export-'));
const arena = Arena.create(planLayout({ layers: [784, 64, 10], batch: 50, samples: 8000 }));
try {
  const { train, test } = loadMnist({ seed: 1 });
  const trainer = new Trainer(arena, { lr: 0.05 });
  trainer.init(1);
  await trainer.fit(train, { epochs: 1, seed: 1 });

  const onnxFile = join(dir, 'mnist.onnx');
  console.log(`ONNX: ${saveOnnx(arena, onnxFile)} bytes; safetensors: ${saveSafetensors(arena, join(dir, 'mnist.safetensors'))} bytes`);

  const x = Float32Array.from(test.x.subarray(0, 100 * 784)); // 100 held-out digits
  const session = await ort.InferenceSession.create(onnxFile);
  const { output } = await session.run({ input: new ort.Tensor('float32', x, [100, 784]) });
  const ours = await trainer.predict(x);
  let diff = 0;
  for (let i = 0; i < ours.length; i++) diff = Math.max(diff, Math.abs(ours[i] - output.data[i]));
  console.log(`ONNX Runtime vs predict(): max |difference| ${diff < 1e-6 ? '< 1e-6' : diff}`);
} finally {
  arena.dispose();
  rmSync(dir, { recursive: true, force: true });
}
