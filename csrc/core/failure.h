// failure.h: the one error type of the native core. Every failing call (CUDA, allocation,
// validation) throws a Failure with a stable string code; the addon turns it into a JS error
// carrying `code` (and `field` where an input field was refused), which src/core/errors.ts maps to
// the one class of that code. The message is for users; where it was raised (file and line)
// goes to `detail`, for bug reports, never into the message.
#pragma once
#include <stdexcept>
#include <string>

namespace nna {

struct Failure : std::runtime_error {
  std::string code;
  std::string detail;  // "csrc/core/block.cc:42": where it was raised
  std::string field;   // the option or argument refused, "" when none
  Failure(std::string c, const std::string& message, std::string where = "", std::string f = "")
      : std::runtime_error(message), code(std::move(c)), detail(std::move(where)), field(std::move(f)) {}
};

// The file name from "csrc/" on (the build's absolute paths stay out of reports).
inline std::string sourceOf(const char* file, int line) {
  std::string f(file);
  const size_t at = f.rfind("csrc/");
  return (at == std::string::npos ? f : f.substr(at)) + ":" + std::to_string(line);
}

[[noreturn]] inline void fail(const char* code, const std::string& message, const char* file, int line, const char* field = "") {
  throw Failure(code, message, sourceOf(file, line), field);
}

}  // namespace nna

#define NNA_FAIL(code, message) ::nna::fail((code), (message), __FILE__, __LINE__)
// A failure about one input field (e.g. "deviceBudget"): JS receives it as `error.field`.
#define NNA_FAIL_FIELD(code, field, message) ::nna::fail((code), (message), __FILE__, __LINE__, (field))
