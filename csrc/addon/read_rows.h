// read_rows.h: RowFile, a streamed .npy file's rows gathered into windows (read_rows.cc).
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>

namespace nna::addon {

class RowFile : public Napi::ObjectWrap<RowFile> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit RowFile(const Napi::CallbackInfo& info);
  void Finalize(Napi::BasicEnv env) override;

  // The file, shared with the gathers in flight: unmapped and closed when all let go.
  struct Source {
    int fd = -1;
    uint8_t* map = nullptr;  // the whole file, mapped at the first mmap gather
    size_t mapBytes = 0;
    uint64_t offset = 0, rowBytes = 0, rows = 0;
    ~Source();
  };

 private:
  Napi::Value Gather(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  std::shared_ptr<Source> source_;
};

}  // namespace nna::addon
