// plan-output.ts (CLI): what `nn-arena plan` prints and writes, by option.
import type { Plan } from '../layout/plan.js';
import type { PytorchPrecision } from '../report/pytorch.js';
import { planToSVG } from '../report/svg.js';
import { writeOutputFile } from './output-file.js';
import { planJson, planSummary, regionTable } from './plan.js';
import { vsPytorchJson, vsPytorchText } from './vs-pytorch.js';

export interface PlanOutputOptions {
  json?: boolean;
  svg?: string;
  vsPytorch?: boolean;
  precision?: PytorchPrecision;
}

export function planOutput(plan: Plan, o: PlanOutputOptions): string {
  if (o.svg) writeOutputFile('--svg', o.svg, planToSVG(plan));
  if (o.json)
    return JSON.stringify(
      { ...planJson(plan), ...(o.vsPytorch ? { vsPytorch: vsPytorchJson(plan, o.precision) } : {}), ...(o.svg ? { svg: o.svg } : {}) },
      null,
      2,
    );
  const parts = [planSummary(plan), o.vsPytorch ? vsPytorchText(plan, o.precision) : regionTable(plan)];
  if (o.svg) parts.push(`memory map written to ${o.svg}`);
  return parts.join('\n\n');
}
