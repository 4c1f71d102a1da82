// dataset.ts: a handle to a data set that stays in the arena. fit() and evaluate() read a plain
// { x, labels } object on every call (natively, in one pass that also tells whether it changed:
// src/train/resident.ts); a Dataset is read once and then not at all while it is what the
// arena's data regions hold, so a call costs the same whatever the data set's size. When your
// arrays change in place, say so with update(): the next call reads them again (and uploads
// only if what it read differs from what the device holds).
import { DataError } from '../core/errors.js';
import type { Data } from './data.js';

export class Dataset {
  readonly #data: Data;
  #version = 0;

  /** `data`: { x, labels } or { x, y } as fit() takes it. Its fields are read once, here (the
   *  arrays themselves are read by the first fit / evaluate that uses the handle). */
  constructor(data: Data) {
    if (data === null || typeof data !== 'object') throw new DataError('BAD_DATA', 'data', data, 'must be an object { x, labels } or { x, y }');
    const { x, labels, y, inputs } = data;
    this.#data = Object.freeze({ x, labels, y, inputs }) as Data;
  }

  /** Bumped by update(): the arena holds the handle's data only at the version it read. */
  get version(): number {
    return this.#version;
  }

  /** The arrays changed (in place): the next fit() / evaluate() with this handle reads them
   *  again, checks them, and uploads what differs from what the device holds. */
  update(): void {
    this.#version++;
  }

  /** The fields given to the constructor. @internal */
  static source(d: Dataset): Data {
    return d.#data;
  }
}
