// The timing of one GPT block: forward, backward, the zero-bubble split, the bytes a forward
// keeps for its backward, and the slowdown while other cores compute too.
#include "loom/profile/timing.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>

namespace loom::profile {
namespace {

using model::median_of;

double heap_bytes() {
  struct mallinfo2 mi = mallinfo2();
  return double(mi.uordblks) + double(mi.hblkhd);  // in use: arena + mmapped chunks
}

// Keeps `n` other cores busy with `work` (forked processes) while a block is timed, paused
// (SIGSTOP) and resumed (SIGCONT) so that timings alone and loaded can alternate. A rank of
// loom train shares memory bandwidth and caches with the ranks on the other cores; here a
// block takes up to ~1.8x as long while the other core computes. Processes rather than
// threads keep the parent's heap (which measures the bytes a forward keeps) to itself.
class CoreLoad {
 public:
  CoreLoad(int n, const std::function<void()>& work) {
    if (n <= 0) return;
    // Rounds of work done by the children, in memory they share with the parent: a load that
    // makes no progress (a child stuck in a lock that fork() copied) must not pass for "the
    // other cores do not slow this one down".
    void* shared = mmap(nullptr, sizeof(std::atomic<long>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return;
    rounds_ = new (shared) std::atomic<long>(0);
    std::fflush(nullptr);
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        // The parent's compute threads do not survive fork(). One thread, inline, as a rank runs.
        torch::set_num_threads(1);
        for (;;) {
          work();
          rounds_->fetch_add(1);
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
    pause();
  }
  ~CoreLoad() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
    if (rounds_) munmap(rounds_, sizeof(std::atomic<long>));
  }
  long rounds() const { return rounds_ ? rounds_->load() : 0; }
  void pause() {
    for (pid_t p : pids_) kill(p, SIGSTOP);
    for (pid_t p : pids_) waitpid(p, nullptr, WUNTRACED);  // stopped for sure
  }
  void resume() {
    for (pid_t p : pids_) kill(p, SIGCONT);
  }
  CoreLoad(const CoreLoad&) = delete;
  CoreLoad& operator=(const CoreLoad&) = delete;

 private:
  std::vector<pid_t> pids_;
  std::atomic<long>* rounds_ = nullptr;
};

torch::Tensor run_forward(BlockJob& j) {
  return model::forward_for_timing(*j.block, j.input, j.target, j.loss);
}

}  // namespace

double forward_backward(BlockJob& j) {
  return model::time_forward_backward(*j.block, j.input, j.target, j.grad, j.loss);
}

// One round of `budget` seconds: forwards with autograd as in training and backwards from a
// random output gradient (the head: from its loss), kTimingInFlight micro-batches in flight
// as a stage keeps them (model/block_timing.h); a sample is the median over those
// micro-batches. Activation bytes (first round): heap growth while the forward's output (and
// so its autograd graph) is alive, smallest of 3 tries.
void sample_block(BlockJob& j, double budget) {
  if (j.activation_bytes < 0) {
    j.activation_bytes = 1e30;
    for (int i = 0; i < 3; ++i) {
      const double before = heap_bytes();
      torch::Tensor y = run_forward(j);
      j.activation_bytes = std::min(j.activation_bytes, std::max(0.0, heap_bytes() - before));
    }
  }
  // The zero-bubble split as parallel/stage.cpp runs it (model/linear_uses.h): I, every
  // gradient but the matrix products' weight gradients, then W, those from the products'
  // inputs and output gradients (not for the embedding, whose input is token ids: its whole
  // backward is in I), timed in flight too, on micro-batches of its own.
  const bool split = j.input.is_floating_point();
  std::vector<torch::Tensor> weights = j.block->parameters();
  const auto t_all = Clock::now();
  for (int it = 0; it < 2 || (seconds(t_all) < budget && it < 2000); ++it) {
    const model::InFlightTimes t =
        model::time_in_flight(*j.block, j.input, j.target, j.grad, j.loss);
    model::InFlightTimes parts;
    if (split) parts = model::time_in_flight(*j.block, j.input, j.target, j.grad, j.loss, &weights);
    if (it == 0) continue;  // warm-up
    const double f = model::median_of(t.forward_s);
    j.fwd.push_back(f);
    j.both.push_back(f + model::median_of(t.backward_s));
    if (split) {
      j.in_s.push_back(model::median_of(parts.input_s));
      j.w_s.push_back(model::median_of(parts.weight_s));
    }
  }
}

// In windows of seconds (a machine may take a second or two to settle at a new load). Two
// cycles of: `settle` seconds of the block alone, untimed, then `budget` timed; the same with
// the other cores running it. Returns loaded / alone (medians), or 1 with a warning when the
// load made no progress.
double sustained_slowdown(BlockJob& j, int load_cores, double budget, double settle) {
  if (load_cores <= 0) return 1.0;
  CoreLoad load(load_cores, [&] { forward_backward(j); });
  std::vector<double> alone, loaded;
  auto window = [&](std::vector<double>& out) {
    for (auto t0 = Clock::now(); seconds(t0) < settle;) forward_backward(j);
    for (auto t0 = Clock::now(); out.size() < 3 || seconds(t0) < budget;)
      out.push_back(forward_backward(j));
  };
  long rounds0 = 0;
  for (int cycle = 0; cycle < 2; ++cycle) {
    window(alone);
    rounds0 = load.rounds();
    load.resume();
    window(loaded);
    load.pause();
  }
  if (load.rounds() == rounds0) {
    std::fprintf(stderr,
                 "loom profile: warning: the load on the other cores made no progress; "
                 "the slowdown under load is not measured (1)\n");
    return 1.0;
  }
  return std::max(1.0, median_of(loaded) / median_of(alone));
}

BlockTimes summarize(const BlockJob& j) {
  BlockTimes out;
  out.activation_bytes = j.activation_bytes;
  out.forward_s = median_of(j.fwd);
  out.backward_s = std::max(0.0, median_of(j.both) - out.forward_s);
  if (!j.in_s.empty()) {
    out.input_s = median_of(j.in_s);
    out.weight_s = median_of(j.w_s);
  }
  return out;
}

}  // namespace loom::profile
