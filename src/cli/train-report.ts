// train-report.ts (CLI): `nn-arena train --report FILE.html`: what the run collects for the page.
import { resolve } from 'node:path';
import type { Progress } from '../train/trainer.js';
import { trainingReportHtml, type ProgressPoint, type TrainingReport } from '../report/html.js';
import { machineInfo } from '../report/machine.js';
import type { TransferRecorder } from '../report/transfers.js';
import { writeOutputFile } from './output-file.js';

export class ReportCollector {
  readonly progress: ProgressPoint[] = [];
  readonly #transfers: TransferRecorder;

  /** `transfers`: recording since right after Arena.create (its header copy the only transfer so far). */
  constructor(transfers: TransferRecorder) {
    this.#transfers = transfers;
  }

  onProgress(p: Progress): void {
    this.progress.push({
      epoch: p.epoch,
      batch: p.batch,
      batches: p.batches,
      step: p.step,
      loss: p.loss,
      accuracy: p.accuracy,
      lr: p.lr,
      ...(p.gradNorms ? { gradNorms: p.gradNorms } : {}),
      ...(p.lossScale !== undefined ? { lossScale: p.lossScale } : {}),
    });
  }

  /** Writes the page and returns its absolute path. */
  write(file: string, fields: Omit<TrainingReport, 'progress' | 'transfers' | 'machine' | 'createdAt'>): string {
    const html = trainingReportHtml({
      ...fields,
      progress: this.progress,
      transfers: this.#transfers.byPurpose(),
      machine: machineInfo(),
      createdAt: new Date(),
    });
    writeOutputFile('--report', file, html);
    return resolve(file);
  }
}
