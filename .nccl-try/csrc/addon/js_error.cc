#include "js_error.h"

namespace nna::addon {

Napi::Error jsError(Napi::Env env, const std::string& code, const std::string& message, const std::string& detail, const std::string& field) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  if (!detail.empty()) e.Set("detail", Napi::String::New(env, detail));
  if (!field.empty()) e.Set("field", Napi::String::New(env, field));
  return e;
}

Napi::Error jsError(Napi::Env env, const Failure& f) { return jsError(env, f.code, f.what(), f.detail, f.field); }

}  // namespace nna::addon
