// The example's JS side: decoupled weight decay, and an EMA of the weights kept in a user region
// of the arena (found by name), on an nn-arena arena between its runs.
//
// Ordering contract (docs/embedding.md): nn-arena's runs and transfers leave no device work
// queued once they have returned or resolved, and `await arena.synchronize()` waits for a run
// still in flight. Our functions run only after that, and complete their own work (the CUDA
// kernel is waited for) before they return, so nn-arena's next run sees their writes.
const path = require('node:path');

const addon = require(path.join(__dirname, 'build', 'Release', 'custom_kernel.node'));

/** Whether this build has the CUDA kernel (nvcc was found when it was built). */
exports.cudaBuilt = addon.cudaBuilt;

/** w <- (1 - rate) w in every layer, where the arena's runs work: on the CUDA kernel for a CUDA
 *  arena, in host code for a CPU arena (whose device side is host memory). */
exports.decayWeights = async function decayWeights(arena, rate) {
  await arena.synchronize();
  if (arena.backend === 'cpu') return addon.decayHost(arena.deviceAddress, rate);
  if (!addon.cudaBuilt) throw new Error('nn-arena-custom-kernel was built without nvcc: no CUDA kernel');
  return addon.decayDevice(arena.deviceAddress, rate);
};

/** The CPU function on the arena's host side (after arena.toHost(), before arena.toDevice()). */
exports.decayHostSide = function decayHostSide(arena, rate) {
  return addon.decayHost(arena.hostAddress, rate);
};

/** The CUDA kernel on the device side (CUDA arenas; the caller has awaited arena.synchronize()). */
exports.decayDeviceSide = function decayDeviceSide(arena, rate) {
  if (!addon.cudaBuilt) throw new Error('nn-arena-custom-kernel was built without nvcc: no CUDA kernel');
  return addon.decayDevice(arena.deviceAddress, rate);
};

/** ema <- decay * ema + (1 - decay) * w in every layer, into the user region `name` (default
 *  'ema'; plan it with `extra: [{ name: 'ema', like: 'w' }]`), found by name through the header;
 *  where the arena's runs work, like decayWeights. Returns the elements updated. */
exports.updateEma = async function updateEma(arena, decay, name = 'ema') {
  await arena.synchronize();
  if (arena.backend === 'cpu') return addon.emaHost(arena.deviceAddress, name, decay);
  if (!addon.cudaBuilt) throw new Error('nn-arena-custom-kernel was built without nvcc: no CUDA kernel');
  return addon.emaDevice(arena.deviceAddress, name, decay);
};

/** The CPU EMA on the arena's host side (after arena.toHost()). */
exports.updateEmaHostSide = function updateEmaHostSide(arena, decay, name = 'ema') {
  return addon.emaHost(arena.hostAddress, name, decay);
};
