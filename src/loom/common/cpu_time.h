#pragma once
// CPU seconds used so far by the calling thread, and by the whole process (every thread).
#include <ctime>

namespace loom {

inline double cpu_seconds(clockid_t which) {
  timespec t{};
  ::clock_gettime(which, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
inline double thread_cpu_s() {
  return cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
}
inline double process_cpu_s() {
  return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

}  // namespace loom
