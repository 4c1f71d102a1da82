// run_copies.h: the host <-> device copies a run makes itself (RunParams::copies): a step or a
// forward pass of a caller's batch uploads its rows, runs and reads back its results with one
// wait at the end, instead of three calls that each wait.
#pragma once
#include <cstdint>
#include <vector>

namespace nna {

// Byte ranges of an arena, as offsets from both sides' bases.
struct RunCopies {
  struct Span {
    uint64_t offset = 0, bytes = 0;
  };
  uint8_t* host = nullptr;  // the host side's base (set by Block::runCopies)
  std::vector<Span> in;     // host -> device, before the run's first kernel
  std::vector<Span> out;    // device -> host, after its last
};

}  // namespace nna
