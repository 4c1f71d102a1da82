// errors.ts: the library's error classes and the one table of which class each code comes as.
// Every error carries a stable string `code` to branch on; FieldErrors (LayoutError, OptionError,
// DataError) also name the input field and the value that was refused. A code never changes
// class with the layer that throws it: native failures are mapped through the same table.

/** Every code nn-arena throws, grouped by the class it always comes as. */
export const ERROR_CODES = {
  /** A network description that cannot be laid out. */
  LayoutError: [
    'BAD_SPEC',
    'BAD_LAYERS',
    'BAD_BATCH',
    'BAD_SAMPLES',
    'BAD_MODELS',
    'BAD_DTYPE',
    'BAD_OPTIMIZER',
    'BAD_ORDER',
    'BAD_ALIGN',
    'BAD_ACTIVATIONS',
    'TOO_LARGE',
    'BAD_KIND',
    'BAD_PLAN',
    'BAD_EXTRA',
  ],
  /** An option or argument of a call (arena, trainer, fit, save, selector, budget) refused. */
  OptionError: [
    'BAD_OPTION',
    'BAD_SEED',
    'BAD_LOSS',
    'BAD_COUNT',
    'BAD_PATH',
    'BAD_SELECTOR',
    'BAD_BUDGET',
    'BUDGET_TOO_SMALL',
    'BUDGET_NEEDS_MANAGED',
    'BUDGET_REQUIRED',
    'BAD_ENV',
    'UNKNOWN_OPTION',
  ],
  /** Training data or targets that cannot be used with this network. */
  DataError: [
    'BAD_DATA',
    'BAD_DATA_WIDTH',
    'BAD_LABEL',
    'DATA_TOO_LARGE',
    /** A data or model file that cannot be read (npy, npz, CSV, Arrow, safetensors), or a tensor that does not fit the network. */
    'BAD_FILE',
    'BAD_TENSOR',
  ],
  /** A failure of the arena or its native layer: allocation, transfer, CUDA, lifetime, files. */
  ArenaError: [
    'NO_ADDON',
    'NODE_TOO_OLD',
    'NO_PACKAGE',
    'NO_DEVICE',
    'NO_KERNEL_IMAGE',
    'CUDA_OOM',
    'DEVICE_OOM',
    'CUDA_ERROR',
    'CUBLAS_ERROR',
    'HOST_OOM',
    'MANAGED_LIMIT',
    'DISPOSED',
    'BUSY',
    'NOT_SUPPORTED',
    'NO_REGION',
    'NO_DATA',
    'OUT_OF_RANGE',
    'VIEW_TOO_LARGE',
    'BAD_HEADER',
    'BAD_CHECKPOINT',
    'SAVE_FAILED',
    'DIVERGED',
    'TOO_MANY_STEPS',
    'NO_FORWARD',
    'NO_GRADIENTS',
    'STALLED',
    'BAD_ARGUMENT',
    'INTERNAL',
    'COMPILE_FAILED',
    'NVRTC_ERROR',
    'ABORTED',
    'NCCL_ERROR',
    'NCCL_UNAVAILABLE',
    'RENDEZVOUS_TIMEOUT',
    'RENDEZVOUS_FAILED',
    'PORT_BUSY',
    'WORLD_MISMATCH',
    'BAD_RANK',
    'PEER_LOST',
    'RENDEZVOUS_AUTH',
  ],
} as const;

type Table = typeof ERROR_CODES;
export type ErrorClassName = keyof Table;
export type LayoutCode = Table['LayoutError'][number];
export type OptionCode = Table['OptionError'][number];
export type DataCode = Table['DataError'][number];
export type ArenaCode = Table['ArenaError'][number];
/** The union of every code. */
export type ErrorCode = LayoutCode | OptionCode | DataCode | ArenaCode;

const CLASS_OF = new Map<string, ErrorClassName>(
  (Object.entries(ERROR_CODES) as Array<[ErrorClassName, readonly string[]]>).flatMap(([cls, codes]) => codes.map((c) => [c, cls] as const)),
);

/** The class a code always comes as (ArenaError for a code this version does not know). */
export function errorClassOf(code: string): ErrorClassName {
  return CLASS_OF.get(code) ?? 'ArenaError';
}

export class NnArenaError extends Error {
  readonly code: ErrorCode;
  /** Where the native layer raised it (source file and line), for bug reports; not in the message. */
  readonly detail?: string;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; detail?: string }) {
    super(message, options);
    const cls = errorClassOf(code);
    if (cls !== new.target.name) throw new TypeError(`nn-arena bug: code ${code} belongs to ${cls}, not ${new.target.name}`);
    this.name = new.target.name;
    this.code = code;
    if (options?.detail) this.detail = options.detail;
  }
}

/** An error about one named input field and the value that was refused. */
export class FieldError extends NnArenaError {
  readonly field: string;
  readonly value: unknown;
  constructor(code: ErrorCode, field: string, value: unknown, message: string, options?: { cause?: unknown; detail?: string }) {
    super(code, `${field}: ${message} (got ${describe(value)})`, options);
    this.field = field;
    this.value = value;
  }
}

/** A network description that cannot be laid out. */
export class LayoutError extends FieldError {
  declare readonly code: LayoutCode;
  constructor(code: LayoutCode, field: string, value: unknown, message: string, options?: { cause?: unknown; detail?: string }) {
    super(code, field, value, message, options);
  }
}

/** An option or argument of a call that was refused. */
export class OptionError extends FieldError {
  declare readonly code: OptionCode;
  constructor(code: OptionCode, field: string, value: unknown, message: string, options?: { cause?: unknown; detail?: string }) {
    super(code, field, value, message, options);
  }
}

/** Training data or targets that cannot be used with this network. */
export class DataError extends FieldError {
  declare readonly code: DataCode;
  constructor(code: DataCode, field: string, value: unknown, message: string, options?: { cause?: unknown; detail?: string }) {
    super(code, field, value, message, options);
  }
}

/** A failure of the arena or its native layer: allocation, transfer, CUDA, lifetime. */
export class ArenaError extends NnArenaError {
  declare readonly code: ArenaCode;
  constructor(code: ArenaCode, message: string, options?: { cause?: unknown; detail?: string }) {
    super(code, message, options);
  }
}

/** The error of a call stopped by its AbortSignal: an ArenaError ABORTED whose `name` is
 *  'AbortError' (as fetch's and the DOM's), with the signal's reason as its cause. */
export function abortError(what: string, signal: AbortSignal): ArenaError {
  const e = new ArenaError('ABORTED', `${what}: aborted${signal.reason instanceof Error ? ` (${signal.reason.message})` : ''}`, { cause: signal.reason });
  Object.defineProperty(e, 'name', { value: 'AbortError', configurable: true, writable: true });
  return e;
}

/** The field a native failure of this code is about, where the native side did not name one. */
const NATIVE_FIELD: Partial<Record<ErrorCode, string>> = { BAD_LOSS: 'loss', BAD_BUDGET: 'deviceBudget', BUDGET_TOO_SMALL: 'deviceBudget' };

/** A native error (an Error with `code`, and maybe `detail` and `field`) as the class of its code.
 *  `values`: the inputs of the call, to report the refused value of a field. */
export function fromNative(e: unknown, values: Record<string, unknown> = {}): unknown {
  if (e instanceof NnArenaError || !(e instanceof Error) || typeof (e as { code?: unknown }).code !== 'string') return e;
  const { code, detail, field } = e as Error & { code: string; detail?: string; field?: string };
  const options = { cause: e, ...(typeof detail === 'string' ? { detail } : {}) };
  const cls = errorClassOf(code);
  if (cls === 'ArenaError')
    return new ArenaError((CLASS_OF.has(code) ? code : 'INTERNAL') as ArenaCode, CLASS_OF.has(code) ? e.message : `${code}: ${e.message}`, options);
  const name = typeof field === 'string' && field ? field : (NATIVE_FIELD[code as ErrorCode] ?? 'arguments');
  const Cls = cls === 'LayoutError' ? LayoutError : cls === 'OptionError' ? OptionError : DataError;
  const message = e.message.startsWith(`${name} `) ? e.message.slice(name.length + 1) : e.message;
  return new Cls(code as never, name, values[name], message, options);
}

/** A short, safe rendering of a refused value (never runs user code that could throw). */
export function describe(value: unknown): string {
  try {
    return render(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

function render(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'symbol') return value.toString();
  if (Array.isArray(value))
    return value.length > 8 ? `[${value.slice(0, 8).map(describe).join(', ')}, … ${value.length} items]` : `[${Array.from(value, describe).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    try {
      return JSON.stringify(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
  return String(value);
}
