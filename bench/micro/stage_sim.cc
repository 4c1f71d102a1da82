// stage_sim.cc: the timeline of budgeted runs as the GPU would execute them, without a GPU. It
// replays the residency plan (csrc/budget/residency.h) with the stream rules of the explicit
// stager (csrc/budget/staging.cu): an in stream and an out stream (FIFO, one copy engine each
// way), the compute stream, and the events between them. Phase times come from
// the products' FLOPs at a rate, copy times from bytes at link rates. It shows where the compute
// stream waits for a copy, so a plan change can be judged before spending GPU time.
//   g++ -O2 -std=c++17 -Icsrc bench/micro/stage_sim.cc csrc/train/phases.cc csrc/budget/residency.cc -o /tmp/sim
//   /tmp/sim HEADER_FILE BUDGET [RUNS=4] [STEPS_PER_RUN=2] [TFLOPS=55] [IN_GBPS=54.8] [OUT_GBPS=54.8]
// HEADER_FILE: an arena header (Plan.header written to a file). SIM_MOVES=1 lists every move.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "budget/residency.h"

using namespace nna;

namespace {

const char* kindName(Move::Kind k) {
  switch (k) {
    case Move::Fetch: return "fetch";
    case Move::Place: return "place";
    case Move::WriteBack: return "write-back";
    default: return "drop";
  }
}

struct Timeline {
  const Residency& res;
  double inGB, outGB;
  std::vector<double> ready, lastEvict, phaseDone;
  std::vector<bool> fetched;
  struct Freed {
    uint64_t begin, end;
    double at;
  };
  std::vector<Freed> freed;
  double in = 0, out = 0, drop = 0, compute = 0, inBusy = 0, outBusy = 0;
  bool verbose = std::getenv("SIM_MOVES") != nullptr;

  Timeline(const Residency& r, double i, double o) : res(r), inGB(i), outGB(o), ready(r.model().regions().size(), 0), lastEvict(ready), fetched(ready.size(), false) {}

  double slotFreed(const Move& m, double at) const {
    const uint64_t end = m.slot + res.cost(m.region);
    for (const Freed& f : freed)
      if (f.begin < end && m.slot < f.end) at = std::max(at, f.at);
    return at;
  }

  // Mirrors Stager::issue. `base`: phase numbers of this run start here in phaseDone.
  void issue(const std::vector<Move>& moves, size_t base) {
    const auto& regions = res.model().regions();
    for (const Move& m : moves) {
      const uint32_t r = m.region;
      const double bytes = double(regions[r].bytes);
      if (verbose) std::printf("    %-10s layer %u kind %2u %6.1f MB at slot %6.1f MB\n", kindName(m.kind), regions[r].layer, regions[r].kind, bytes / 1e6, m.slot / 1e6);
      if (m.kind == Move::Place) {  // the compute stream waits for the slot itself
        ready[r] = slotFreed(m, 0);
        fetched[r] = false;
        continue;
      }
      if (m.kind == Move::Fetch) {
        const double start = std::max(slotFreed(m, in), lastEvict[r]);
        in = start + bytes / (inGB * 1e3);
        inBusy += bytes / (inGB * 1e3);
        ready[r] = in;
        fetched[r] = true;
        continue;
      }
      // A drop frees its slot when the phase that last used it ends (no stream to queue on).
      double& stream = m.kind == Move::Drop ? drop : out;
      double start = m.kind == Move::Drop ? 0 : stream;
      if (m.lastUse >= 0) start = std::max(start, phaseDone[base + uint64_t(m.lastUse)]);
      if (fetched[r]) start = std::max(start, ready[r]);
      const double d = m.kind == Move::Drop ? 0 : bytes / (outGB * 1e3);
      stream = start + d;
      outBusy += d;
      fetched[r] = false;
      lastEvict[r] = stream;
      freed.push_back({m.slot, m.slot + res.cost(r), stream});
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sim HEADER BUDGET [RUNS] [STEPS_PER_RUN] [TFLOPS] [IN_GBPS] [OUT_GBPS]\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<uint8_t> hdr((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const uint64_t budget = std::strtoull(argv[2], nullptr, 10);
  const uint64_t runs = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4, steps = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 2;
  const double tflops = argc > 5 ? std::atof(argv[5]) : 55, inGB = argc > 6 ? std::atof(argv[6]) : 54.8, outGB = argc > 7 ? std::atof(argv[7]) : 54.8;
  try {
    Residency res(hdr.data(), Placement::Staged, budget);
    const StepModel& m = res.model();
    const double B = double(m.header().batch);
    auto units = [&](uint32_t l) { return double(m.layers()[l].units); };
    // A phase's time: its products (forward: one; backward: dw and, past layer 1, d[l-1]) + small
    // kernels; the gather reads its rows of the data set over the link, in place.
    const double elem = m.header().dtype == NNA_FLOAT64 ? 8 : 4;
    const double rowsBytes = B * (units(0) + units(uint32_t(m.layers().size() - 1))) * elem;
    auto micros = [&](const PhaseInfo& ph) {
      if (ph.stage == Stage::Gather) return rowsBytes / (inGB * 1e3);
      double flop = 0;
      if (ph.stage == Stage::Forward) flop = 2 * B * units(ph.layer - 1) * units(ph.layer);
      if (ph.stage == Stage::Backward) flop = (ph.layer > 1 ? 4 : 2) * B * units(ph.layer - 1) * units(ph.layer);
      return flop / (tflops * 1e6) + 20;
    };
    Timeline tl(res, inGB, outGB);
    const auto& regions = m.regions();
    double computeAlone = 0, waited = 0, runStart = 0;
    for (uint64_t run = 0; run < runs; ++run) {
      RunParams p;
      p.op = Op::Train;
      p.resident = m.header().samples > 0;
      p.samples = m.header().samples;
      p.numBatches = steps;
      Planner plan(res, p);
      const size_t base = tl.phaseDone.size();
      tl.phaseDone.resize(base + plan.phases(), 0);
      std::vector<Move> moves;
      plan.start(moves);
      tl.issue(moves, base);
      for (uint64_t t = 0; t < plan.phases(); ++t) {
        const PhaseInfo& ph = plan.phase(t);
        moves.clear();
        if (tl.verbose) std::printf("  before %s %u\n", stageName(ph.stage), ph.layer);
        plan.before(t, moves);
        tl.issue(moves, base);
        double start = tl.compute;
        for (const Use& u : ph.uses)
          if (!regions[u.region].remote) start = std::max(start, tl.ready[u.region]);
        if (start - tl.compute > 50)
          std::printf("  run %llu step %llu: %s %u waits %.0f us\n", (unsigned long long)run, (unsigned long long)(t / plan.phasesPerStep()), stageName(ph.stage), ph.layer,
                      start - tl.compute);
        waited += start - tl.compute;
        tl.compute = start + micros(ph);
        if (run == 0 && t < plan.phasesPerStep()) computeAlone += micros(ph);
        tl.phaseDone[base + t] = tl.compute;
        moves.clear();
        if (tl.verbose) std::printf("  after %s %u (ends at %.0f us)\n", stageName(ph.stage), ph.layer, tl.compute);
        plan.after(t, moves);
        tl.issue(moves, base);
      }
      moves.clear();
      plan.finish(moves);
      tl.issue(moves, base);
      // endRun synchronises every stream: the next run starts when the last copy has ended.
      const double end = std::max({tl.compute, tl.in, tl.out, tl.drop});
      tl.compute = tl.in = tl.out = tl.drop = end;
      std::printf("run %llu: %.0f us per step (moved in %.1f MB, out %.1f MB per step; %llu B in, %llu B out in the run)\n", (unsigned long long)run, (end - runStart) / steps,
                  res.lastRun.fetchedBytes / 1e6 / steps, res.lastRun.writtenBackBytes / 1e6 / steps, (unsigned long long)res.lastRun.fetchedBytes,
                  (unsigned long long)res.lastRun.writtenBackBytes);
      runStart = end;
    }
    std::printf("compute alone %.0f us per step; the compute stream waited %.0f us for copies in all; link busy in %.0f us, out %.0f us\n", computeAlone, waited, tl.inBusy,
                tl.outBusy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
