#pragma once
// A Work is the handle of one communication operation (c10d style): test() polls, wait()
// blocks until completion or the operation's timeout. Every failure, a timeout included, is
// raised as loom::Error naming the rank, the communicator and the operation. Each backend
// supplies its own kind of Work (mpi_backend.h, c10d_backend.cpp).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::comm {

class Work {
 public:
  // `what` names the operation and communicator; `ready_after_s` is the emulated link's delay
  // (the operation completes no earlier than that many seconds after it started).
  Work(std::string what, std::chrono::milliseconds timeout, double ready_after_s = 0);
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // True once the operation completed (successfully or not); never blocks.
  bool test();
  // Blocks until completion; throws loom::Error on failure or timeout.
  void wait();
  // Seconds this rank spent blocked in wait() (exposed communication).
  double waited_s() const { return waited_s_; }
  const std::string& what() const { return what_; }

  // Runs on the waiting thread once the operation completed (a device copy-back, say).
  void then(std::function<void()> f) { finish_ = std::move(f); }
  // Called once with the operation's busy seconds (start to completion, emulated delay
  // included) when this rank first sees it complete; the backend's byte and time counters.
  void on_complete(std::function<void(double)> f) { on_complete_ = std::move(f); }

 protected:
  // When the operation completed, if the backend knows better than "when first seen".
  virtual std::chrono::steady_clock::time_point completion_time() { return seen_at_; }
  // True when the library reports completion.
  virtual bool completed() = 0;
  // Blocks until completion or the deadline; false on timeout. Throws std::exception (any kind)
  // when the operation failed; wait() adds the context.
  virtual bool block_until(std::chrono::steady_clock::time_point deadline) = 0;

 private:
  void complete_once();

  std::string what_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point ready_at_;
  std::chrono::steady_clock::time_point seen_at_;
  std::function<void()> finish_;
  std::function<void(double)> on_complete_;
  bool counted_ = false;
  bool finished_ = false;
  double waited_s_ = 0;
};

using WorkPtr = std::shared_ptr<Work>;

// Several operations as one: complete when all of them are. wait() waits on each in turn (each
// with its own timeout; the first failure is reported with its own operation named).
class WorkGroup : public Work {
 public:
  WorkGroup(std::string what, std::chrono::milliseconds timeout, double ready_after_s,
            std::vector<WorkPtr> parts);

 protected:
  bool completed() override;
  bool block_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  std::vector<WorkPtr> parts_;
};

// Waits on all of them in order.
void wait_all(const std::vector<WorkPtr>& works);

}  // namespace loom::comm
