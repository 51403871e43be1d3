#include "loom/train/fault_injection.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "loom/common/error.h"
#include "loom/train/preemption.h"

namespace loom::train {

namespace {

bool fault_here(int rank, int64_t step) {
  static const char* r = std::getenv("LOOM_FAULT_RANK");
  static const char* s = std::getenv("LOOM_FAULT_STEP");
  static const char* restarts = std::getenv("LOOM_RESTART_COUNT");  // set by the launchers
  if (restarts && std::atoi(restarts) > 0) return false;            // a restarted job runs clean
  return r && s && std::atoi(r) == rank && std::atoll(s) == step;
}

std::string fault_kind() {
  static const char* kind = std::getenv("LOOM_FAULT_KIND");
  return kind ? kind : "kill";
}

}  // namespace

double injected_loss_scale(int rank, int64_t step, double scale) {
  return fault_here(rank, step) && fault_kind() == "nan" ? std::nan("") : scale;
}

void inject_disk_full(int rank, int64_t step, const char* kind, const std::string& path) {
  if (fault_here(rank, step) && fault_kind() == kind)
    throw Error(detail::concat("cannot write '", path, "': No space left on device (",
                               "LOOM_FAULT_KIND=", kind, ")"));
}

void inject_slow_write(int rank, int64_t step) {
  if (fault_here(rank, step) && fault_kind() == "slow-write")
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

void inject_slow_copy(int rank, int64_t step) {
  if (!fault_here(rank, step) || fault_kind() != "slow-copy") return;
  const auto say = [&](const char* what) {
    std::fprintf(stderr, "[rank %d] LOOM_FAULT_KIND=slow-copy: the copies of step %lld %s\n", rank,
                 static_cast<long long>(step), what);
    std::fflush(stderr);
  };
  say("start in 3 s");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  say("start now");
}

void maybe_inject_fault(int rank, int64_t step) {
  const std::string kind = fault_kind();
  if (!fault_here(rank, step) || kind == "nan" || kind.rfind("slow-", 0) == 0 ||
      kind.find("disk-full") != std::string::npos)
    return;
  TORCH_CHECK(kind != "torch-error", "LOOM_FAULT_KIND=torch-error on rank ", rank, " at step ",
              step);
  if (kind == "out-of-memory") throw std::bad_alloc();
  const bool hang = fault_kind() == "hang";
  std::fprintf(stderr, "[rank %d] LOOM_FAULT_RANK: %s this rank at step %lld\n", rank,
               hang ? "hanging" : "killing", static_cast<long long>(step));
  if (hang) {
    // Hung, but a SIGTERM from the launcher ends it as it would end the process without
    // loom's stop handler (which only records it): no wait for the SIGKILL.
    while (!local_stop_signal()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::_Exit(128 + local_stop_signal());
  } else
    std::raise(SIGKILL);
}

}  // namespace loom::train
