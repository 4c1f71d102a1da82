// rng.ts: a small seeded generator (splitmix64 reduced to 53-bit floats). The same seed gives
// the same numbers on every machine, so weight init and shuffles are reproducible.
export class Rng {
  #state: bigint;
  constructor(seed: number) {
    this.#state = BigInt.asUintN(64, BigInt(Math.trunc(seed)) ^ 0x9e3779b97f4a7c15n);
  }
  /** The generator's state (hex), for a checkpoint; Rng.fromState gives it back. */
  get state(): string {
    return this.#state.toString(16);
  }
  static fromState(hex: string): Rng {
    const r = new Rng(0);
    r.#state = BigInt.asUintN(64, BigInt(`0x${hex}`));
    return r;
  }
  /** @internal The raw state: the native shuffle buffer draws from it (the same generator). */
  get bits(): bigint {
    return this.#state;
  }
  set bits(v: bigint) {
    this.#state = BigInt.asUintN(64, v);
  }
  /** Uniform in [0, 1) with 53 random bits. */
  next(): number {
    this.#state = BigInt.asUintN(64, this.#state + 0x9e3779b97f4a7c15n);
    let z = this.#state;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** A random bijection k -> (a*k + c) mod n of an epoch's sample order (a coprime to n). */
export function affinePermutation(rng: Rng, n: number): { a: number; c: number } {
  if (n <= 2) return { a: 1, c: n === 2 ? rng.int(2) : 0 };
  let a = 1 + rng.int(n - 1);
  while (gcd(a, n) !== 1) a = 1 + rng.int(n - 1);
  return { a, c: rng.int(n) };
}

/** (a * b) mod n, exact for any safe integers a, b, n. */
export function mulmod(a: number, b: number, n: number): number {
  const p = a * b;
  return Number.isSafeInteger(p) ? p % n : Number((BigInt(a) * BigInt(b)) % BigInt(n));
}

/** The inverse of a modulo n (a coprime to n): the position of a row in an affine order. */
export function modInverse(a: number, n: number): number {
  let [r0, r1, t0, t1] = [n, a % n, 0, 1];
  while (r1 !== 0) {
    const q = Math.floor(r0 / r1);
    [r0, r1, t0, t1] = [r1, r0 - q * r1, t1, t0 - q * t1];
  }
  return ((t0 % n) + n) % n;
}
