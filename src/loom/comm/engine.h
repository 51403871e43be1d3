#pragma once
// The progress engine: one thread per process owns every MPI call after initialization.
// Protocol:
//  1. A caller submits an operation (a closure that posts one non-blocking MPI call).
//  2. The engine thread posts operations in submission order; so operations on a communicator
//     are posted in the order the caller issued them, which MPI requires to match across ranks.
//  3. The engine polls all posted requests with MPI_Testsome (Open MPI progresses non-blocking
//     collectives only inside MPI calls). While some thread waits on a Work it polls eagerly;
//     otherwise it sleeps briefly between polls so it does not steal the compute core.
//  4. On completion (and after the emulated link delay, if any) it marks the Work done.
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/comm/types.h"
#include "loom/comm/work.h"

namespace loom::comm {

class Engine {
 public:
  static Engine& instance();
  void start();
  void stop();
  void set_emulation(LinkEmulation e) { emulation_ = e; }
  const LinkEmulation& emulation() const { return emulation_; }

  struct Op {
    WorkPtr work;
    std::function<MPI_Request()> post;      // runs on the engine thread
    std::function<void(double)> on_done;    // busy seconds; runs on the engine thread
    uint64_t bytes = 0;                     // for the emulated link
  };
  void submit(Op op);

  // Work::wait() tells the engine someone is blocked, so it polls without sleeping, and wakes
  // it from its idle back-off (wake_for_waiter) at once.
  static std::atomic<int>& waiters();
  void wake_for_waiter();

 private:
  void loop();
  struct Active {
    Op op;
    MPI_Request req;
    double start;
    double ready = -1;  // completion time known, waiting out the emulated delay
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::thread thread_;
  LinkEmulation emulation_;
};

}  // namespace loom::comm
