#include "loom/comm/mpi_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "loom/common/error.h"
#include "loom/common/thread_slice.h"

namespace loom::comm {

void EngineWork::mark_done(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
    done_at_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

bool EngineWork::completed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_ && !error_.empty()) throw Error(error_);
  return done_;
}

bool EngineWork::block_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_) {
    Engine::waiters().fetch_add(1);
    Engine::instance().wake_for_waiter();
    cv_.wait_until(lock, deadline, [&] { return done_; });
    Engine::waiters().fetch_sub(1);
  }
  if (done_ && !error_.empty()) throw Error(error_);
  return done_;
}

std::chrono::steady_clock::time_point EngineWork::completion_time() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_at_;
}

namespace {

// 10 ms unless LOOM_ENGINE_SLICE_US says otherwise (0: the kernel's default; for A/B runs).
std::chrono::microseconds engine_slice() {
  if (const char* v = std::getenv("LOOM_ENGINE_SLICE_US"); v && *v)
    return std::chrono::microseconds(std::atoll(v));
  return std::chrono::milliseconds(10);
}

}  // namespace

Engine& Engine::instance() {
  static Engine e;
  return e;
}

std::atomic<int>& Engine::waiters() {
  static std::atomic<int> w{0};
  return w;
}

void Engine::start(bool time_shared) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  time_shared_ = time_shared;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  running_ = false;
}

void Engine::submit(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    LOOM_CHECK(running_, "communication engine not started (loom::comm::init missing)");
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
}

void Engine::wake_for_waiter() {
  // Through the mutex: the loop either has not checked `waiters` yet or already sleeps.
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
}

void Engine::loop() {
  std::vector<Active> active;
  std::vector<MPI_Request> reqs;
  std::vector<int> indices;
  int idle_polls = 0;
  // While nobody waits, the loop polls the posted requests with a back-off from 50 us to 1 ms.
  // It runs on the core of the rank's compute thread (mpirun binds a rank to one core), and
  // every wake-up preempts the compute: polling every 100 us made the actions that ran with a
  // receive posted 25-50% slower here (a VM, where each timer wake-up costs an exit). Transfers
  // do not need the sender to poll (shared memory copies are pulled by the receiver, CMA), and
  // a thread that starts waiting wakes the loop at once.
  constexpr int kIdleMinUs = 50, kIdleMaxUs = 1000;
  // Only quiet operations posted (Op::quiet): every wake-up would only preempt the compute.
  // Over shared memory with single copy, bfs on 2 ranks stepped 4.5% faster with these bounds;
  // over TCP or without single copy they made steps 12-27% slower (docs/architecture.md).
  constexpr int kQuietMinUs = 1000, kQuietMaxUs = 10000;
  // While somebody waits: a few yields, then 20 us sleeps. A vCPU spinning on sched_yield
  // slowed the rank computing on the other vCPU by ~1.3x here (a spin of 2000 yields, a few
  // ms per wait, made 2-rank steps 10-14% slower than 50 yields did); sleeps did not.
  constexpr int kWaitSpins = 50;
  int idle_us = kIdleMinUs;
  if (time_shared_) set_thread_slice(engine_slice());
  slice_us_ = loom::thread_slice().count();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (active.empty()) cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty() && active.empty()) return;
      while (!queue_.empty()) {
        Op op = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        MPI_Request r = op.post();
        if (r == MPI_REQUEST_NULL) {  // completed inside post()
          op.post = nullptr;          // the buffers, released before the waiter resumes
          op.work->mark_done();
        } else
          active.push_back(Active{std::move(op), r});
        lock.lock();
      }
    }
    // Poll the posted requests.
    reqs.clear();
    for (auto& a : active) reqs.push_back(a.req);
    indices.resize(reqs.size());
    int outcount = 0;
    bool progressed = false;
    if (!reqs.empty()) {
      MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, indices.data(),
                   MPI_STATUSES_IGNORE);
      if (outcount == MPI_UNDEFINED) outcount = 0;
    }
    for (int k = 0; k < outcount; ++k) {
      Active& done = active[indices[k]];
      // The buffers first: a waiter that drops its tensors then frees their memory (the
      // runtime's memory accounting counts it right after the wait).
      done.op.post = nullptr;
      done.op.work->mark_done();
      done.req = MPI_REQUEST_NULL;
      progressed = true;
    }
    // Keep the order of those still in flight.
    std::erase_if(active, [](const Active& a) { return a.req == MPI_REQUEST_NULL; });
    if (progressed) {
      idle_polls = 0;
      idle_us = kIdleMinUs;
      continue;
    }
    if (waiters().load(std::memory_order_relaxed) > 0) {  // someone is blocked: poll hard
      idle_us = kIdleMinUs;
      if (idle_polls < kWaitSpins) {
        ++idle_polls;
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      continue;
    }
    // Nobody blocked: back off so the compute thread keeps its core.
    const bool quiet =
        std::all_of(active.begin(), active.end(), [](const Active& a) { return a.op.quiet; });
    idle_us = quiet ? std::max(idle_us, kQuietMinUs) : std::min(idle_us, kIdleMaxUs);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::microseconds(idle_us),
                 [&] { return stopping_ || !queue_.empty() || waiters().load() > 0; });
    idle_us = std::min(2 * idle_us, quiet ? kQuietMaxUs : kIdleMaxUs);
  }
}

}  // namespace loom::comm
