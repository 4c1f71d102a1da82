// errors.ts: the library's error classes. Each carries a stable string `code` to branch on;
// FieldError (LayoutError, DataError) also names the input field and the value that was refused.

export class NnArenaError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** An error about one named input field and the value that was refused. */
export class FieldError extends NnArenaError {
  readonly field: string;
  readonly value: unknown;
  constructor(code: string, field: string, value: unknown, message: string) {
    super(code, `${field}: ${message} (got ${describe(value)})`);
    this.field = field;
    this.value = value;
  }
}

/** A network description that cannot be laid out. */
export class LayoutError extends FieldError {}

/** Training data or targets that cannot be used with this network. */
export class DataError extends FieldError {}

/** A failure of the arena or its native layer: allocation, transfer, CUDA, lifetime. */
export class ArenaError extends NnArenaError {}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (Array.isArray(value)) return value.length > 8 ? `[${value.slice(0, 8).map(describe).join(', ')}, … ${value.length} items]` : `[${value.map(describe).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    try { return JSON.stringify(value); } catch { return Object.prototype.toString.call(value); }
  }
  return String(value);
}
