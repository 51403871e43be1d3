#pragma once
// The MPI progress engine: one thread per process owns every MPI call after initialization.
// Protocol:
//  1. A caller submits an operation (a closure that posts one non-blocking MPI call).
//  2. The engine thread posts operations in submission order; so operations on a communicator
//     are posted in the order the caller issued them, which MPI requires to match across ranks.
//  3. The engine polls all posted requests with MPI_Testsome (Open MPI progresses non-blocking
//     collectives only inside MPI calls). While some thread waits on a Work it polls eagerly;
//     otherwise it sleeps briefly between polls so it does not steal the compute core, and
//     ten times longer while every posted operation is quiet (Op::quiet).
//  4. On completion it marks the Work done.
// When this machine's ranks outnumber its cores, the engine thread takes a long scheduler slice
// (thread_slice.h): its polls then wait for the next scheduling point instead of preempting a
// rank that computes. 4 ranks on 2 cores stepped about 8% faster so (docs/architecture.md); with
// a core per rank it made pipeline steps 3-5% slower, so it is left out there.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/comm/work.h"

namespace loom::comm {

// A Work completed by the engine thread.
class EngineWork : public Work {
 public:
  using Work::Work;
  void mark_done(std::string error = {});

 protected:
  bool completed() override;
  bool block_until(std::chrono::steady_clock::time_point deadline) override;
  std::chrono::steady_clock::time_point completion_time() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  std::chrono::steady_clock::time_point done_at_;
};

class Engine {
 public:
  static Engine& instance();
  // `time_shared`: more ranks on this machine than cores.
  void start(bool time_shared = false);
  // The engine thread's scheduler slice as the kernel reports it once the thread runs (0
  // before, or where the kernel does not say).
  std::chrono::microseconds thread_slice() const {
    return std::chrono::microseconds(slice_us_.load());
  }
  void stop();

  struct Op {
    std::shared_ptr<EngineWork> work;
    std::function<MPI_Request()> post;  // runs on the engine thread
    // The transfer needs no progress from this process until someone waits on it: a message
    // to or from a rank of this machine that Open MPI copies in one step (the receiver pulls
    // it when it polls; the sender's request only completes). While only such operations are
    // posted, the idle back-off is ten times longer (1 to 10 ms).
    bool quiet = false;
  };
  void submit(Op op);

  // A waiting thread tells the engine someone is blocked, so it polls without sleeping, and
  // wakes it from its idle back-off (wake_for_waiter) at once.
  static std::atomic<int>& waiters();
  void wake_for_waiter();

 private:
  void loop();
  struct Active {
    Op op;
    MPI_Request req;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool running_ = false;
  bool time_shared_ = false;
  std::atomic<int64_t> slice_us_{0};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loom::comm
