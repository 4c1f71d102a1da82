// export.ts: `nn-arena export --format onnx|safetensors CHECKPOINT OUT`. Every argument is checked
// before the checkpoint is read; the checkpoint is opened on the CPU backend (nothing runs).
import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Arena } from '../arena.js';
import { saveOnnx } from '../export/onnx.js';
import { saveSafetensors } from '../export/safetensors.js';
import { sequentialSource } from '../export/sequential.js';
import { int, parseInteger, usage } from './format.js';

export const EXPORT_FORMATS = ['onnx', 'safetensors'] as const;

export function runExport(checkpoint: string, out: string, o: { format: (typeof EXPORT_FORMATS)[number]; model?: string }): void {
  if (!existsSync(checkpoint) || !statSync(checkpoint).isFile()) throw usage(`CHECKPOINT: ${checkpoint} is not a file`);
  const folder = dirname(resolve(out));
  if (!existsSync(folder) || !statSync(folder).isDirectory()) throw usage(`OUT: the folder ${folder} does not exist`);
  if (existsSync(out) && statSync(out).isDirectory()) throw usage(`OUT: ${out} is a folder`);
  const model = o.model === undefined ? 0 : parseInteger(o.model, 'model', 0);
  const arena = Arena.load(checkpoint, { backend: 'cpu' });
  try {
    const bytes = (o.format === 'onnx' ? saveOnnx : saveSafetensors)(arena, out, { model });
    console.log(`${out}: ${o.format}, ${int(bytes)} bytes; ${sequentialSource(arena.plan.spec)}${arena.plan.spec.models > 1 ? `, model ${model} of ${arena.plan.spec.models}` : ''}`);
  } finally {
    arena.dispose();
  }
}
