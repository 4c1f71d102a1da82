// npz.ts: NumPy .npz archives (np.savez: stored entries; np.savez_compressed: deflated), each
// member .npy read by src/formats/npy.ts. A stored member's data is a view over the archive's
// bytes when it lies aligned to its element (else one copy). What deflated members inflate to is
// bounded (maxInflatedBytes): deflate packs zeros about a thousandfold, so a file's size says
// little of the memory its members take.
import { DataError, OptionError } from '../core/errors.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { bytesOf } from './file.js';
import { npyData, parseNpyHeader, type NpyArray } from './npy.js';
import { readZip } from './zip.js';

export interface NpzOptions {
  /** The most bytes the archive's deflated (np.savez_compressed) members may inflate to, in all
   *  (default: 16 times the archive's size, and at least 64 MiB; Infinity for no bound). A member
   *  that would go past it is refused, DataError DATA_TOO_LARGE naming this option, before more
   *  than the bound is allocated. Stored (np.savez) members are views and do not count. */
  maxInflatedBytes?: number;
}

const OPTION_KEYS = keysOf<NpzOptions>()(['maxInflatedBytes']);
const MIN_INFLATED = 64 * 2 ** 20;

/** Reads a .npz archive (a path or its bytes): one array per member, by name without `.npy`. */
export function loadNpz(source: string | Uint8Array, options: NpzOptions = {}): Record<string, NpyArray> {
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { maxInflatedBytes? }');
  checkKnownKeys(options, OPTION_KEYS, 'loadNpz');
  const { maxInflatedBytes } = options;
  if (
    maxInflatedBytes !== undefined &&
    !(typeof maxInflatedBytes === 'number' && maxInflatedBytes >= 0 && (Number.isSafeInteger(maxInflatedBytes) || maxInflatedBytes === Infinity))
  ) {
    throw new OptionError('BAD_OPTION', 'maxInflatedBytes', maxInflatedBytes, 'must be a whole number of bytes >= 0, or Infinity');
  }
  const bytes = bytesOf(source);
  const out: Record<string, NpyArray> = {};
  for (const { name, data } of readZip(bytes, maxInflatedBytes ?? Math.max(16 * bytes.length, MIN_INFLATED))) {
    if (!name.endsWith('.npy')) throw new DataError('BAD_FILE', 'npz member', name, 'is not a .npy file');
    const key = name.slice(0, -4);
    if (Object.hasOwn(out, key)) throw new DataError('BAD_FILE', 'npz member', name, 'appears twice');
    const h = parseNpyHeader(data);
    Object.defineProperty(out, key, {
      value: { dtype: h.dtype, shape: h.shape, data: npyData(data, h, `${key} data`) },
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
