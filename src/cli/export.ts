// export.ts: `nn-arena export --format onnx|safetensors CHECKPOINT OUT`. Every argument is checked
// before the checkpoint is read; the checkpoint is opened on the CPU backend (nothing runs).
import { existsSync, statSync } from 'node:fs';
import { Arena } from '../arena/arena.js';
import { saveOnnx } from '../export/onnx.js';
import { saveSafetensors } from '../export/safetensors.js';
import { sequentialSource } from '../export/sequential.js';
import { int, parseInteger, usage } from './format.js';
import { checkOutputFile } from './output-file.js';

export const EXPORT_FORMATS = ['onnx', 'safetensors'] as const;

export function runExport(checkpoint: string, out: string, o: { format: (typeof EXPORT_FORMATS)[number]; model?: string }): void {
  if (!existsSync(checkpoint) || !statSync(checkpoint).isFile()) throw usage(`CHECKPOINT: ${checkpoint} is not a file`);
  checkOutputFile('OUT', out); // the savers check it again as they write (a FIFO there would block)
  const model = o.model === undefined ? 0 : parseInteger(o.model, 'model', 0);
  const arena = Arena.load(checkpoint, { backend: 'cpu' });
  try {
    const bytes = (o.format === 'onnx' ? saveOnnx : saveSafetensors)(arena, out, { model });
    console.log(
      `${out}: ${o.format}, ${int(bytes)} bytes; ${sequentialSource(arena.plan.spec)}${arena.plan.spec.models > 1 ? `, model ${model} of ${arena.plan.spec.models}` : ''}`,
    );
  } finally {
    arena.dispose();
  }
}
