#pragma once
// Operations waited on, in the order handed over, by a thread of their own: for a caller that
// must not block yet must see its operations complete where a poll cannot (c10d's Gloo reports
// a send or receive complete only to a wait: its Work::test() stays false). The caller hands
// over each operation as it posts it and asks how many were waited on; it does not touch an
// operation's Work until then.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "loom/comm/work.h"

namespace loom::comm {

class WaitThread {
 public:
  WaitThread();
  // Returns once the wait in progress returned (within its operation's timeout); operations
  // not waited on yet are left as they are.
  ~WaitThread();
  WaitThread(const WaitThread&) = delete;
  WaitThread& operator=(const WaitThread&) = delete;

  // To be waited on after those handed over before.
  void add(WorkPtr w);
  // How many were waited on so far; rethrows the failure (a timeout included) of the first
  // wait that threw (the thread waits on nothing after it).
  size_t waited();
  // Blocks until `n` were waited on; rethrows as waited() does.
  void wait_for(size_t n);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkPtr> queue_;
  size_t waited_ = 0;
  std::exception_ptr failure_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is in place
};

}  // namespace loom::comm
