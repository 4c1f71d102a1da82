// npz.ts: NumPy .npz archives (np.savez: stored entries; np.savez_compressed: deflated), each
// member .npy read by src/formats/npy.ts. A stored member's data is a view over the archive's
// bytes when it lies aligned to its element (else one copy).
import { DataError } from '../errors.js';
import { bytesOf } from './file.js';
import { npyData, parseNpyHeader, type NpyArray } from './npy.js';
import { readZip } from './zip.js';

/** Reads a .npz archive (a path or its bytes): one array per member, by name without `.npy`. */
export function loadNpz(source: string | Uint8Array): Record<string, NpyArray> {
  const out: Record<string, NpyArray> = {};
  for (const { name, data } of readZip(bytesOf(source))) {
    if (!name.endsWith('.npy')) throw new DataError('BAD_FILE', 'npz member', name, 'is not a .npy file');
    const key = name.slice(0, -4);
    if (Object.hasOwn(out, key)) throw new DataError('BAD_FILE', 'npz member', name, 'appears twice');
    const h = parseNpyHeader(data);
    Object.defineProperty(out, key, { value: { dtype: h.dtype, shape: h.shape, data: npyData(data, h, `${key} data`) }, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
