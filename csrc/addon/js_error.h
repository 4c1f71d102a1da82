// js_error.h: how native failures reach JS. One shape for every error the addon throws or
// rejects with: an Error with a string `code`, `detail` (where it was raised, for bug reports)
// and `field` (the input refused, if any); src/core/errors.ts turns it into the one class of that code.
#pragma once
#include <napi.h>

#include <string>

#include "../core/failure.h"

namespace nna::addon {

Napi::Error jsError(Napi::Env env, const std::string& code, const std::string& message, const std::string& detail = "", const std::string& field = "");
Napi::Error jsError(Napi::Env env, const Failure& f);

[[noreturn]] inline void throwJs(Napi::Env env, const std::string& code, const std::string& message) { throw jsError(env, code, message); }

// Runs f, turning a core Failure (or an allocation failure) into a JS exception with a code.
template <typename F> auto guarded(Napi::Env env, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Failure& e) { throw jsError(env, e); } catch (const std::bad_alloc&) {
    throwJs(env, "HOST_OOM", "out of host memory");
  }
}

}  // namespace nna::addon
