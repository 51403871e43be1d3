#include "loom/comm/work.h"

#include <thread>

#include "loom/comm/comm_failure.h"
#include "loom/common/error.h"
#include "loom/common/log.h"

namespace loom::comm {

using Clock = std::chrono::steady_clock;

Work::Work(std::string what, std::chrono::milliseconds timeout, double ready_after_s)
    : what_(std::move(what)),
      timeout_(timeout),
      start_(Clock::now()),
      ready_at_(start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(ready_after_s))) {}

Work::~Work() = default;

void Work::complete_once() {
  if (counted_) return;
  counted_ = true;
  const auto done = std::max(completion_time(), ready_at_);
  if (on_complete_) on_complete_(std::chrono::duration<double>(done - start_).count());
}

bool Work::test() {
  if (finished_) return true;
  try {
    if (!completed()) return false;
  } catch (...) {
    return true;  // failed: wait() reports it
  }
  if (seen_at_ == Clock::time_point{}) seen_at_ = Clock::now();
  return Clock::now() >= ready_at_;
}

CommFailure communication_failed(const std::string& what, std::string error) {
  // c10d's messages carry a C++ backtrace after the first line; the first line says it all.
  if (auto nl = error.find('\n'); nl != std::string::npos) error.resize(nl);
  return CommFailure(
      detail::concat("[rank ", log::rank(), "] communication failed: ", what, ": ", error));
}

Error communication_timeout(const std::string& what, std::chrono::milliseconds timeout) {
  return Error(detail::concat("[rank ", log::rank(), "] communication timeout: ", what,
                              " did not complete within ", timeout.count() / 1000.0,
                              " s (a peer rank died or waits on a different operation; ",
                              "raise LOOM_COMM_TIMEOUT_S if the machine is just slow)"));
}

void Work::wait() {
  if (finished_) return;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout_;
  bool ok = false;
  std::string failure;
  try {
    ok = block_until(deadline);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (ok && seen_at_ == Clock::time_point{}) seen_at_ = Clock::now();
  if (ok) std::this_thread::sleep_until(ready_at_);
  waited_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  if (!failure.empty()) throw communication_failed(what_, failure);
  if (!ok) throw communication_timeout(what_, timeout_);
  complete_once();
  finished_ = true;
  if (finish_) finish_();
}

WorkGroup::WorkGroup(std::string what, std::chrono::milliseconds timeout, double ready_after_s,
                     std::vector<WorkPtr> parts)
    : Work(std::move(what), timeout, ready_after_s), parts_(std::move(parts)) {}

bool WorkGroup::completed() {
  for (const auto& w : parts_)
    if (!w->test()) return false;
  return true;
}

bool WorkGroup::block_until(Clock::time_point) {
  wait_all(parts_);
  return true;
}

void wait_all(const std::vector<WorkPtr>& works) {
  for (const auto& w : works)
    if (w) w->wait();
}

}  // namespace loom::comm
