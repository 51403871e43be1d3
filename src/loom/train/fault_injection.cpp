#include "loom/train/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace loom::train {

void maybe_inject_fault(int rank, int64_t step) {
  static const char* r = std::getenv("LOOM_FAULT_RANK");
  static const char* s = std::getenv("LOOM_FAULT_STEP");
  static const char* kind = std::getenv("LOOM_FAULT_KIND");
  if (!r || !s || std::atoi(r) != rank || std::atoll(s) != step) return;
  bool hang = kind && std::string(kind) == "hang";
  std::fprintf(stderr, "[rank %d] LOOM_FAULT_RANK: %s this rank at step %lld\n", rank,
               hang ? "hanging" : "killing", static_cast<long long>(step));
  if (hang)
    std::this_thread::sleep_for(std::chrono::hours(1));
  else
    std::raise(SIGKILL);
}

}  // namespace loom::train
