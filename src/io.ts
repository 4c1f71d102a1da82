// nn-arena/io: data in and models out, beside the core (src/index.ts): the loaders of .npy,
// .npz, CSV and Apache Arrow data into typed arrays (and toData for tables), the streaming
// sources a fit() reads windows from, and model export / import (safetensors, ONNX). They use
// the core's Arena and Trainer (one copy: tsup's shared chunks); the core imports none of them.
export { toSafetensors, saveSafetensors, loadSafetensors, readSafetensors, type SafetensorsFile, type SafetensorsTensor } from './export/safetensors.js';
export { toOnnx, saveOnnx } from './export/onnx.js';
export { type ModelOptions } from './export/params.js';
export { loadNpy, toNpy, type NpyArray, type NpyDtype, type NpyData } from './formats/npy.js';
export { loadNpz, type NpzOptions } from './formats/npz.js';
export { loadCsv, type CsvOptions } from './formats/csv.js';
export { loadArrow, type ArrowOptions } from './formats/arrow.js';
export { toData, type RowTable, type ColumnTable, type ColumnChoice, type NumericArray } from './formats/table.js';
export { streamNpy, streamBatches, type DataStream, type NpyStreamFiles } from './train/stream.js';
