#pragma once
// A Work is the handle of one communication operation (PyTorch c10d style): test() polls,
// wait() blocks until completion or the operation's timeout, which raises loom::Error naming the
// rank, the communicator and the operation.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom::comm {

class Work {
 public:
  explicit Work(std::string what, std::chrono::milliseconds timeout);
  bool test() const;
  void wait();
  // Seconds this rank spent blocked in wait() (exposed communication).
  double waited_s() const { return waited_s_; }
  const std::string& what() const { return what_; }

  // Called by the progress engine.
  void mark_done(std::string error = {});

 private:
  std::string what_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  double waited_s_ = 0;
};

using WorkPtr = std::shared_ptr<Work>;

// Waits on all of them in order.
void wait_all(const std::vector<WorkPtr>& works);

}  // namespace loom::comm
