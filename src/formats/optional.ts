// optional.ts: packages nn-arena uses only when asked (optional peer dependencies), loaded when
// first needed; a missing one is ArenaError NO_PACKAGE naming it.
import { ArenaError } from '../core/errors.js';

export async function optionalImport<T>(name: string, forWhat: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (e) {
    const code = (e as { code?: unknown })?.code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new ArenaError('NO_PACKAGE', `${forWhat} needs the optional package '${name}', which is not installed: npm install ${name}`, { cause: e });
    }
    throw e;
  }
}
