// errors.ts: the code of the ArenaError a call throws (undefined when it does not throw).
import { expect } from 'vitest';
import { ArenaError } from '../../src/index.js';

export function codeOf(f: () => unknown): string | undefined {
  try { f(); } catch (e) {
    expect(e).toBeInstanceOf(ArenaError);
    return (e as ArenaError).code;
  }
  return undefined;
}
