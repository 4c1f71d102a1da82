#include "crc32c.h"

#include <cstring>

namespace nna {
namespace {

struct Table {
  uint32_t t[256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[i] = c;
    }
  }
};

uint32_t crcTable(uint32_t crc, const uint8_t* p, size_t n) {
  static const Table table;
  for (size_t i = 0; i < n; ++i) crc = table.t[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) uint32_t crcHardware(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  crc = hw ? crcHardware(crc, p, n) : crcTable(crc, p, n);
#else
  crc = crcTable(crc, p, n);
#endif
  return ~crc;
}

}  // namespace nna
