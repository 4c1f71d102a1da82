// train-report.ts (CLI): `nn-arena train --report FILE.html`: what the run collects for the page.
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Arena } from '../arena.js';
import type { Progress } from '../train/trainer.js';
import { trainingReportHtml, type ProgressPoint, type TrainingReport } from '../report/html.js';
import { machineInfo } from '../report/machine.js';
import { recordTransfers, type TransferRecorder } from '../report/transfers.js';

export class ReportCollector {
  readonly progress: ProgressPoint[] = [];
  readonly #transfers: TransferRecorder;

  /** Start right after Arena.create: its header copy is then the only transfer so far. */
  constructor(arena: Arena) { this.#transfers = recordTransfers(arena); }

  onProgress(p: Progress): void {
    this.progress.push({ epoch: p.epoch, batch: p.batch, batches: p.batches, step: p.step, loss: p.loss, accuracy: p.accuracy });
  }

  /** Writes the page and returns its absolute path. */
  write(file: string, fields: Omit<TrainingReport, 'progress' | 'transfers' | 'machine' | 'createdAt'>): string {
    const html = trainingReportHtml({ ...fields, progress: this.progress, transfers: this.#transfers.byPurpose(), machine: machineInfo(), createdAt: new Date() });
    this.#transfers.stop();
    writeFileSync(file, html);
    return resolve(file);
  }
}
