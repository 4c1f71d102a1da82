// crc32c.h: CRC-32C (Castagnoli) for checkpoint files: SSE4.2 instructions where the CPU has
// them, a table otherwise; both give the same value.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nna {
// Continues `crc` (0 to start) over n bytes.
uint32_t crc32c(uint32_t crc, const uint8_t* p, size_t n);
}  // namespace nna
