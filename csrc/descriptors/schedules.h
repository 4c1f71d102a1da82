// schedules.h: the learning-rate schedules (torch.optim.lr_scheduler), evaluated in the run for
// every step from the schedule's parameters (no upload per step), on the host and the device;
// and the parameter-table type that the optimizers' hyperparameters share (optimizers.h).
// Adding a schedule: its kind, its row in scheduleTable, its case in lrAt.
#pragma once
#include <math.h>
#include <stdint.h>

#include "host_device.h"

namespace nna {

// One numeric parameter of a table (an optimizer's hyperparameter, a schedule's parameter): the
// double field of S it sets (null: the run's learning rate), its default and its range. The
// addon hands these tables to TypeScript (csrc/addon/descriptors.cc), which checks options with
// them; nothing else lists the names.
enum ParamType : uint32_t { kReal = 0, kFlag = 1, kInteger = 2 };
template <class S> struct ParamSpec {
  const char* name;
  double S::*field;
  double def, lo, hi;
  bool loOpen, hiOpen;  // lo < x (else lo <= x); x < hi (else x <= hi)
  ParamType type;
  const char* doc;
};

enum ScheduleKind : uint32_t { kConstant = 0, kStepLr = 1, kCosine = 2, kOneCycle = 3 };

// Every schedule's parameters; the table says which kind reads which.
struct Schedule {
  uint32_t kind = kConstant;
  double stepSize = 1, gamma = 0.1;                                // step: StepLR
  double warmup = 0, total = 1, minLr = 0, startFactor = 1.0 / 3;  // cosine: LinearLR, then CosineAnnealingLR
  double pctStart = 0.3, divFactor = 25, finalDivFactor = 1e4;     // one-cycle: OneCycleLR
};

// The learning rate of optimizer step i (0-based: the scheduler steps taken before it) from the
// base rate lr, closed forms of PyTorch's (recursive, equal up to rounding) updates:
//   step       StepLR(stepSize, gamma): lr * gamma^floor(i / stepSize)
//   cosine     SequentialLR([LinearLR(startFactor, 1.0, warmup), CosineAnnealingLR(total - warmup,
//              minLr)], milestones=[warmup]): a linear warmup, then half a cosine to minLr at
//              step `total` (beyond it the cosine goes on, as PyTorch's does)
//   one-cycle  OneCycleLR(max_lr=lr, total, pctStart, 'cos', divFactor, finalDivFactor,
//              three_phase=False, cycle_momentum=False); a run past `total` is refused (check.cc)
NNA_FN double lrAt(const Schedule& s, double lr, uint64_t i) {
  const double x = double(i);
  const double pi = 3.14159265358979323846;
  switch (s.kind) {
    case kStepLr: return lr * pow(s.gamma, floor(x / s.stepSize));
    case kCosine:
      if (x < s.warmup) return lr * (s.startFactor + (1.0 - s.startFactor) * x / s.warmup);
      return s.minLr + (lr - s.minLr) * (1.0 + cos(pi * (x - s.warmup) / (s.total - s.warmup))) / 2.0;
    case kOneCycle: {
      const double initial = lr / s.divFactor, last = initial / s.finalDivFactor;
      const double up = s.pctStart * s.total - 1.0, down = s.total - 1.0;
      if (x <= up) return lr + (initial - lr) / 2.0 * (cos(pi * x / up) + 1.0);
      return last + (lr - last) / 2.0 * (cos(pi * (x - up) / (down - up)) + 1.0);
    }
    default: return lr;
  }
}

using ScheduleParam = ParamSpec<Schedule>;

struct ScheduleInfo {
  uint32_t kind;
  const char* name;
  const char* doc;
  const ScheduleParam* params;
  uint32_t numParams;
};

// The schedules, in kind order (host only).
inline const ScheduleInfo* scheduleTable(uint32_t* count) {
  static constexpr double inf = INFINITY;
  static const ScheduleParam stepP[] = {{"stepSize", &Schedule::stepSize, 1, 1, inf, false, true, kInteger, "steps between decays"},
                                        {"gamma", &Schedule::gamma, 0.1, 0, inf, true, true, kReal, "factor of each decay"}};
  static const ScheduleParam cosineP[] = {{"total", &Schedule::total, 1, 1, inf, false, true, kInteger, "steps of warmup and cosine together"},
                                          {"warmup", &Schedule::warmup, 0, 0, inf, false, true, kInteger, "linear warmup steps (< total)"},
                                          {"startFactor", &Schedule::startFactor, 1.0 / 3, 0, 1, true, false, kReal, "warmup starts at lr * startFactor"},
                                          {"minLr", &Schedule::minLr, 0, 0, inf, false, true, kReal, "learning rate at the end of the cosine"}};
  static const ScheduleParam oneCycleP[] = {{"total", &Schedule::total, 1, 2, inf, false, true, kInteger, "steps of the cycle (a run past it is refused)"},
                                            {"pctStart", &Schedule::pctStart, 0.3, 0, 1, true, true, kReal, "part of the cycle spent raising the rate"},
                                            {"divFactor", &Schedule::divFactor, 25, 0, inf, true, true, kReal, "the cycle starts at lr / divFactor"},
                                            {"finalDivFactor", &Schedule::finalDivFactor, 1e4, 0, inf, true, true, kReal, "and ends at lr / divFactor / finalDivFactor"}};
  static const ScheduleInfo table[] = {{kConstant, "constant", "the learning rate of every step", nullptr, 0},
                                       {kStepLr, "step", "StepLR: lr * gamma^floor(step / stepSize)", stepP, 2},
                                       {kCosine, "cosine", "linear warmup (LinearLR), then cosine annealing to minLr (CosineAnnealingLR)", cosineP, 4},
                                       {kOneCycle, "one-cycle", "OneCycleLR (cosine, two phases; lr is the maximum)", oneCycleP, 4}};
  *count = uint32_t(sizeof table / sizeof table[0]);
  return table;
}

}  // namespace nna
