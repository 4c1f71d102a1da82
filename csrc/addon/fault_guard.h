// fault_guard.h: reads from a mapped file that survive the file being cut short under the
// mapping. Such a read faults (SIGBUS), which would end the process; inside guardMappedReads it
// ends only the reads: the caller gets false and treats the rows as not read (the file ended).
#pragma once

#include <functional>

namespace nna::addon {

// Runs `reads` (copies out of mapped file pages, nothing else: it is left mid-way on a fault) on
// this thread; false when a page it touched was beyond the file's end.
bool guardMappedReads(const std::function<void()>& reads);

}  // namespace nna::addon
