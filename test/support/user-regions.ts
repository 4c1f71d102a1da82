// user-regions.ts: the user regions (planLayout's `extra`) the user-region tests plan, and how
// they read a plan's regions.
import type { LayoutSpec, Plan, Region } from '../../src/index.js';

export const EXTRA = [
  { name: 'ema', like: 'w' },
  { name: 'mask', per: 'z', layers: [2, 1] },
  { name: 'rng', bytes: 1000 },
] as const;
export const SPEC: LayoutSpec = { layers: [5, 4, 3], batch: 2, optimizer: 'momentum', samples: 6, extra: EXTRA };

export const end = (r: Region) => r.offset + r.bytes;
export const byName = (p: Plan, name: string) => p.regions.filter((r) => r.kind === name);
