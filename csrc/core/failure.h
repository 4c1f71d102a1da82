// failure.h: the one error type of the native core. Every failing call (CUDA, allocation,
// validation) throws a Failure with a stable string code; the addon turns it into an
// ArenaError in JS. NNA_FAIL records file and line so a report points at the call.
#pragma once
#include <stdexcept>
#include <string>

namespace nna {

struct Failure : std::runtime_error {
  std::string code;
  Failure(std::string c, const std::string& message) : std::runtime_error(message), code(std::move(c)) {}
};

[[noreturn]] inline void fail(const char* code, const std::string& message, const char* file, int line) {
  throw Failure(code, message + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace nna

#define NNA_FAIL(code, message) ::nna::fail((code), (message), __FILE__, __LINE__)
