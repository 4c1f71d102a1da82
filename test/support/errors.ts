// errors.ts: the code of the nn-arena error a call throws (undefined when it does not throw),
// checked to come as the one class of its code (src/core/errors.ts ERROR_CODES).
import { expect } from 'vitest';
import { errorClassOf, NnArenaError } from '../../src/index.js';

export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(NnArenaError);
    const err = e as NnArenaError;
    expect(err.name).toBe(errorClassOf(err.code));
    return err.code;
  }
  return undefined;
}
