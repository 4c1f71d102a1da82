#include "fault_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <mutex>

namespace nna::addon {

namespace {

thread_local sigjmp_buf* guarded = nullptr;  // this thread is inside guardMappedReads
struct sigaction previous;                   // SIGBUS's disposition before ours

// A fault of a guarded read leaves the reads; any other SIGBUS gets the previous disposition:
// restored, then the faulting instruction runs again (a sent signal is raised again).
void onBus(int sig, siginfo_t* info, void* context) {
  if (guarded) siglongjmp(*guarded, 1);
  sigaction(SIGBUS, &previous, nullptr);
  if (info && info->si_code <= 0) raise(sig);
  (void)context;
}

void install() {
  struct sigaction sa = {};
  sa.sa_sigaction = onBus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous);
}

}  // namespace

bool guardMappedReads(const std::function<void()>& reads) {
  static std::once_flag once;
  std::call_once(once, install);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {  // back from onBus: the signal mask as it was
    guarded = nullptr;
    return false;
  }
  guarded = &jump;
  reads();
  guarded = nullptr;
  return true;
}

}  // namespace nna::addon
