#include "phases_js.h"

#include <string>
#include <vector>

#include "../core/validate.h"
#include "../train/phases.h"
#include "convert.h"
#include "js_error.h"

namespace nna::addon {

Napi::Value phasesOf(Napi::Env env, const uint8_t* header, const Napi::CallbackInfo& info) {
  const uint64_t op = exactU64(env, info[1], "op");
  if (op > uint64_t(Op::Forward)) throwJs(env, "BAD_ARGUMENT", "unknown op " + std::to_string(op));
  const bool resident = boolean(env, info[2], "resident");
  const Path path = boolean(env, info[3], "fused") ? Path::Fused : Path::Layers;
  return guarded(env, [&] {
    const StepModel m(header);
    const std::vector<PhaseInfo> phases = m.step(Op(op), resident, path);
    Napi::Array out = Napi::Array::New(env, phases.size());
    for (uint32_t i = 0; i < phases.size(); ++i) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("stage", Napi::String::New(env, stageName(phases[i].stage)));
      o.Set("layer", Napi::Number::New(env, phases[i].layer));
      Napi::Array uses = Napi::Array::New(env, phases[i].uses.size());
      for (uint32_t j = 0; j < phases[i].uses.size(); ++j) {
        const RegionInfo& r = m.regions()[phases[i].uses[j].region];
        Napi::Array use = Napi::Array::New(env, 3);
        use.Set(0u, Napi::Number::New(env, r.layer));
        use.Set(1u, Napi::String::New(env, kindName(r.kind)));
        use.Set(2u, Napi::Boolean::New(env, phases[i].uses[j].access & kRead));
        uses.Set(j, use);
      }
      o.Set("uses", uses);
      out.Set(i, o);
    }
    return out;
  });
}

}  // namespace nna::addon
