// comm_group.h: the ranks of one group in this process (CommGroup), kept in one place because
// NCCL's abort and destroy are intra-node collectives: every rank must take part in one call.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../cuda/check.cuh"
#include "communicator.h"
#include "nccl_loader.h"

namespace nna {

// The ranks of one group in this process (one rank for a multi-process group). NCCL's abort
// and destroy are intra-node collectives: the ranks one thread drives must be grouped, and no
// rank may be inside another NCCL call meanwhile. So a failed run only marks the group; each
// rank's thread parks (in its wait for the device) or ends its run, and the last one to go
// quiet aborts every rank in one grouped call. Destruction is grouped the same way: the last
// rank released destroys them all.
struct CommGroup {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Communicator*> members;
  std::vector<void*> comms;    // by rank within the process; null once aborted or destroyed
  std::vector<bool> quiet;     // by member: parked or done with the current run
  std::vector<bool> released;  // by member: destructor ran
  bool failed = false, aborted = false;
  std::string why;

  size_t indexOf(const Communicator* c) const { return size_t(std::find(members.begin(), members.end(), c) - members.begin()); }

  // With the mutex held: once failed and every member quiet, abort every rank at once. A graph
  // that holds collectives is a knot: NCCL's abort waits until no graph names its communicator,
  // destroying a graph still in flight waits for the graph to finish, and a graph whose peer
  // failed finishes only once the abort has stopped its kernels. So, where graphs are kept, the
  // abort runs on a thread of its own; once it has raised the communicators' abort flags (its
  // first act, before it waits), this thread waits for each graph's device to drain and
  // destroys the graphs, and the abort can end. Quiet, no member is launching.
  void abortIfQuiet() {
    if (!failed || aborted || std::find(quiet.begin(), quiet.end(), false) != quiet.end()) return;
    std::vector<std::pair<int, std::function<void()>>> graphs;
    for (Communicator* m : members)
      if (m->releaseGraph_) graphs.emplace_back(m->device_, std::exchange(m->releaseGraph_, nullptr));
    std::mutex raisedMutex;
    std::condition_variable raisedCv;
    bool raised = false;
    auto abortAll = [&] {
      const nccl::Api& a = nccl::api();
      a.groupStart();
      for (void*& c : comms)
        if (c) {
          a.commAbort(static_cast<nccl::Comm>(c));  // raises the flags now; waits in groupEnd
          c = nullptr;
        }
      {
        std::lock_guard<std::mutex> lock(raisedMutex);
        raised = true;
      }
      raisedCv.notify_all();
      a.groupEnd();
    };
    if (graphs.empty()) {
      abortAll();
    } else {
      std::thread aborting(abortAll);
      {
        std::unique_lock<std::mutex> lock(raisedMutex);
        raisedCv.wait(lock, [&] { return raised; });
      }
      for (auto& [device, release] : graphs) {
        DeviceScope scope(device, std::nothrow);
        (void)cudaDeviceSynchronize();  // the stopped kernels end; an error here is the failure's own
        release();
      }
      aborting.join();
    }
    aborted = true;
    cv.notify_all();
  }
};

}  // namespace nna
