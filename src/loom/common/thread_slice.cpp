#include "loom/common/thread_slice.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace loom {
namespace {

// The kernel's struct sched_attr, first version (48 bytes): <linux/sched/types.h> clashes with
// glibc's <sched.h>.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // a normal thread's requested slice, ns (0: default)
  uint64_t sched_deadline;
  uint64_t sched_period;
};

bool get_attr(SchedAttr* a) {
  std::memset(a, 0, sizeof *a);
  return ::syscall(SYS_sched_getattr, 0, a, sizeof *a, 0) == 0;
}

}  // namespace

bool set_thread_slice(std::chrono::microseconds slice) {
  SchedAttr a;
  if (!get_attr(&a) || a.sched_policy != SCHED_OTHER) return false;
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = uint64_t(std::max<int64_t>(0, slice.count())) * 1000;  // keeps the nice value
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

std::chrono::microseconds thread_slice() {
  SchedAttr a;
  if (!get_attr(&a)) return std::chrono::microseconds(0);
  return std::chrono::microseconds(a.sched_runtime / 1000);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace loom
