// addon_data.h: what the addon keeps per JS environment (main thread or worker): the arena
// handle's class, by which jit.cc and nccl.cc recognise handles, and the symbol a view holds its
// handle under (arena_handle.cc).
#pragma once
#include <napi.h>

namespace nna::addon {

struct AddonData {
  Napi::FunctionReference arenaClass;
  Napi::Reference<Napi::Symbol> viewOwner;
};

}  // namespace nna::addon
