// view-range.ts: which host bytes Arena.view(layer, kind, model) / view(name, layer, model) covers,
// and as what elements: the arguments checked (OptionError naming the bad one), the region
// found (ArenaError NO_REGION saying how to name it), one model's copy or every copy.
import { ArenaError, OptionError } from '../core/errors.js';
import type { Plan } from '../layout/plan.js';

/** The view's arguments, checked, and the arena's cache key of it. */
export interface ViewKey {
  key: string;
  layer: number;
  kind: string;
}

export interface ViewRange {
  offset: number;
  bytes: number;
  /** A user region of raw bytes (a Uint8Array view). */
  raw: boolean;
  /** Bytes an element: 1 (raw), 4 or 8. */
  elem: number;
}

export function viewKey(plan: Plan, a: number | string, b: number | string | undefined, model: number | undefined): ViewKey {
  const [layer, kind] = typeof a === 'string' ? [b ?? -1, a] : [a, b];
  if (typeof kind !== 'string') throw new OptionError('BAD_OPTION', 'kind', kind, 'must be a region kind or a user region name');
  if (typeof layer !== 'number' || !Number.isInteger(layer)) throw new OptionError('BAD_OPTION', 'layer', layer, 'must be a layer index');
  // Checked before the cache: a model index '0' must not find the view of model 0.
  const models = plan.spec.models;
  if (model !== undefined && (typeof model !== 'number' || !Number.isSafeInteger(model) || model < 0 || model >= models)) {
    throw new OptionError('BAD_OPTION', 'model', model, `must be an integer in [0, ${models - 1}] (the plan holds ${models} model${models === 1 ? '' : 's'})`);
  }
  return { key: `${layer}:${kind}:${model ?? ''}`, layer, kind };
}

/** On a miss of the arena's cache only: the region found, one model's copy or every copy. */
export function viewRange(plan: Plan, { layer, kind }: ViewKey, model: number | undefined): ViewRange {
  const r = plan.region(layer, kind);
  if (!r) {
    const global = plan.spec.extra.some((e) => e.name === kind && e.bytes !== undefined);
    throw new ArenaError(
      'NO_REGION',
      global
        ? `'${kind}' is a global user region: view('${kind}') takes no layer`
        : layer === -1
          ? `'${kind}' has a region per layer: view('${kind}', layer)`
          : `layer ${layer} has no region '${kind}' in this plan`,
    );
  }
  const raw = r.extra !== undefined && plan.spec.extra[r.extra]!.bytes !== undefined;
  const elem = raw ? 1 : plan.spec.dtype === 'float64' ? 8 : 4;
  const [offset, bytes] = model === undefined ? [r.offset, r.bytes] : [r.offset + model * r.stride, r.length * elem];
  return { offset, bytes, raw, elem };
}
