// device_probe.h: reading an arena's device side from its address alone (arena.deviceAddress),
// as a user's module would: this addon is not the library's, so it never sees an arena handle.
// device_probe.cu with CUDA; absent.cc (NO_DEVICE) without.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nna {

// nna_bind for every (layer, kind) of the arena at the device address `base`, run in a kernel on
// the device that owns it: the offsets it computed (layers x NNA_KIND_COUNT, ~0 for absent).
void probeBindOnDevice(void* base, uint32_t numLayers, uint64_t* out);
// `bytes` from a device (or managed, or staged) address to host memory.
void copyFromDevice(void* dst, const void* src, size_t bytes);

}  // namespace nna
