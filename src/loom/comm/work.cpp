#include "loom/comm/work.h"

#include "loom/comm/engine.h"
#include "loom/common/error.h"
#include "loom/common/log.h"

namespace loom::comm {

Work::Work(std::string what, std::chrono::milliseconds timeout)
    : what_(std::move(what)), timeout_(timeout) {}

bool Work::test() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::mark_done(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

void Work::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_) {
    auto t0 = std::chrono::steady_clock::now();
    Engine::waiters().fetch_add(1);
    Engine::instance().wake_for_waiter();
    bool ok = cv_.wait_for(lock, timeout_, [&] { return done_; });
    Engine::waiters().fetch_sub(1);
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ok) {
      throw Error(detail::concat(
          "[rank ", log::rank(), "] communication timeout: ", what_, " did not complete within ",
          timeout_.count() / 1000.0, " s (a peer rank died or waits on a different operation; ",
          "raise LOOM_COMM_TIMEOUT_S if the machine is just slow)"));
    }
  }
  if (!error_.empty()) throw Error(error_);
}

void wait_all(const std::vector<WorkPtr>& works) {
  for (const auto& w : works)
    if (w) w->wait();
}

}  // namespace loom::comm
