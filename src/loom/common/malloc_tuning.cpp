#include "loom/common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace loom {

bool tune_malloc_for_training() {
  auto env = [](const char* name) { return std::getenv(name); };
  if (const char* v = env("LOOM_MALLOC_TUNING"); v && std::strcmp(v, "0") == 0) return false;
  if (const char* t = env("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc.")) return false;
  if (env("MALLOC_MMAP_THRESHOLD_") || env("MALLOC_TRIM_THRESHOLD_")) return false;
  // Blocks below 32 MiB (glibc's largest allowed threshold) come from the heap and are reused;
  // the heap is trimmed only when more than 1 GiB is free at its top. Larger blocks still use
  // mmap, so a huge temporary goes back to the system when freed.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace loom
