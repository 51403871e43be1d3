#include "loom/common/blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>

namespace loom {

std::string openblas_core() {
  // Looked up at run time: loom links the generic libblas, which OpenBLAS may or may not be.
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!fn) return "";
  const char* name = fn();
  return name ? name : "";
}

bool set_openblas_threads(int n) {
  using SetThreads = void (*)(int);
  auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (!fn) return false;
  fn(n < 1 ? 1 : n);
  return true;
}

std::string best_openblas_core_for_cpu() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

bool openblas_core_is_fallback() {
  // The kernel sets OpenBLAS uses for CPUs it cannot identify, none of them with AVX2.
  static constexpr std::array<const char*, 8> kGeneric = {
      "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Northwood"};
  const std::string core = openblas_core();
  if (core.empty() || best_openblas_core_for_cpu().empty()) return false;
  for (const char* g : kGeneric)
    if (strcasecmp(core.c_str(), g) == 0) return true;
  return false;
}

void ensure_fast_openblas(char** argv) {
  auto off = [](const char* name, const char* v) {
    const char* e = std::getenv(name);
    return e && std::strcmp(e, v) == 0;
  };
  if (off("LOOM_BLAS_FIX", "0") || std::getenv("LOOM_BLAS_REEXEC") ||
      std::getenv("OPENBLAS_CORETYPE") || !openblas_core_is_fallback())
    return;
  const std::string best = best_openblas_core_for_cpu();
  setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
  setenv("LOOM_BLAS_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the slow kernels; `loom doctor` reports them.
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace loom
