#include "loom/comm/wait_thread.h"

namespace loom::comm {

WaitThread::WaitThread() : thread_([this] { run(); }) {}

WaitThread::~WaitThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WaitThread::add(WorkPtr w) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(w));
  }
  cv_.notify_all();
}

size_t WaitThread::waited() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_) std::rethrow_exception(failure_);
  return waited_;
}

void WaitThread::wait_for(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return waited_ >= n || failure_; });
  if (failure_) std::rethrow_exception(failure_);
}

void WaitThread::run() {
  for (;;) {
    WorkPtr w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      w = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr failure;
    try {
      w->wait();  // its own timeout bounds it
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failure)
        failure_ = failure;
      else
        ++waited_;
    }
    cv_.notify_all();
    if (failure) return;
  }
}

}  // namespace loom::comm
