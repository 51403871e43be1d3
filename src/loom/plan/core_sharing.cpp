#include "loom/plan/core_sharing.h"

#include <algorithm>
#include <limits>

#include "loom/common/error.h"

namespace loom::plan {

CoreSharing::CoreSharing(int cores, int replicas, int jobs, double oversubscribed)
    : cores_(std::max(1, cores)), replicas_(std::max(1, replicas)), jobs_(size_t(jobs)) {
  if (jobs * replicas_ > cores_) oversub_ = std::max(1.0, oversubscribed);
}

double CoreSharing::rate(int computing, int cores, double slowdown) {
  const double S = std::max(1.0, slowdown);
  if (computing <= 1) return 1.0;
  if (computing <= cores) return 1.0 / (1.0 + (S - 1.0) * (computing - 1) / (cores - 1));
  return double(cores) / computing / S;
}

void CoreSharing::submit(int job, double start, double work_s, double slowdown) {
  Job& j = jobs_.at(size_t(job));
  LOOM_CHECK(j.state == State::Idle, "core sharing: job ", job, " submitted twice");
  // Inputs are known only once they exist, so nothing starts before the clock (rounding aside).
  j = {State::Running, std::max(start, clock_), std::max(0.0, work_s), slowdown, 0};
}

bool CoreSharing::take_finished(int job, double* end) {
  Job& j = jobs_.at(size_t(job));
  if (j.state != State::Finished) return false;
  *end = j.end;
  j.state = State::Idle;
  return true;
}

bool CoreSharing::any_running() const {
  return std::any_of(jobs_.begin(), jobs_.end(),
                     [](const Job& j) { return j.state == State::Running; });
}

bool CoreSharing::resolve() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (any_running()) {
    // Jobs computing now, and the next start of one that waits.
    int computing = 0;
    double next_start = kInf;
    for (const Job& j : jobs_) {
      if (j.state != State::Running) continue;
      if (j.start <= clock_)
        ++computing;
      else
        next_start = std::min(next_start, j.start);
    }
    bool done = false;
    if (computing == 0) {
      clock_ = next_start;
      continue;
    }
    const int world = computing * replicas_;
    double next_end = kInf;
    for (const Job& j : jobs_)
      if (j.state == State::Running && j.start <= clock_)
        next_end =
            std::min(next_end, clock_ + j.left / (rate(world, cores_, j.slowdown) / oversub_));
    const double t = std::min(next_end, next_start);
    for (Job& j : jobs_) {
      if (j.state != State::Running || j.start > clock_) continue;
      const double r = rate(world, cores_, j.slowdown) / oversub_;
      if (clock_ + j.left / r <= t + 1e-12 * std::max(1.0, t)) {  // ends now (within rounding)
        j.left = 0;
        j.state = State::Finished;
        j.end = t;
        done = true;
      } else {
        j.left -= (t - clock_) * r;
      }
    }
    clock_ = t;
    if (done) return true;
  }
  return false;
}

}  // namespace loom::plan
