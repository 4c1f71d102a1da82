// phases_js.h: one step's phase table (csrc/train/phases.h) as JS, the one conversion behind the
// shipped stepPhases (of a planner's shape) and the test addon's headerPhases (of a planned
// header), which test/compact.test.ts compares.
#pragma once
#include <napi.h>

#include <cstdint>

namespace nna::addon {

// The phases of one step of `header` (a validated header, or a shape's header with offsets 0),
// info[1..3] being op, resident, fused: [{ stage, layer, uses: [[layer, kind, reads], ...] }]
// (reads: the use's value comes from before the phase, kRead of its access).
Napi::Value phasesOf(Napi::Env env, const uint8_t* header, const Napi::CallbackInfo& info);

}  // namespace nna::addon
