#pragma once
// OpenBLAS kernel selection.
//
// OpenBLAS (DYNAMIC_ARCH, as Debian builds it) picks its matrix kernels from the CPU model
// when the library loads. A CPU newer than the OpenBLAS release is not recognised and gets the
// generic "Prescott" (SSE3) kernels: on this project's Xeon (family 6, model 207, AVX-512),
// Debian 12's OpenBLAS 0.3.21 does 31 GFLOP/s per core on a 512x512 matmul with them and
// 109 GFLOP/s with the SkylakeX kernels. The environment variable OPENBLAS_CORETYPE overrides
// the choice, but only before the library loads, i.e. before main(); loom therefore re-executes
// itself once with it set (see ensure_fast_openblas).
#include <string>

namespace loom {

// The kernel set OpenBLAS chose in this process ("Prescott", "SkylakeX", ...); "" when the BLAS
// in use is not OpenBLAS (or too old to say).
std::string openblas_core();

// The best kernel set this CPU supports according to its instruction-set flags: "SkylakeX"
// (AVX-512 F/BW/VL/DQ), "Haswell" (AVX2 + FMA), or "" (nothing better than the generic ones).
std::string best_openblas_core_for_cpu();

// True when OpenBLAS fell back to a generic kernel set although the CPU supports a better one.
bool openblas_core_is_fallback();

// If openblas_core_is_fallback() and the user has not set OPENBLAS_CORETYPE, sets it to
// best_openblas_core_for_cpu() and re-executes /proc/self/exe with the same arguments (once:
// LOOM_BLAS_REEXEC marks the second run). Must be called first thing in main(), before MPI or
// any thread starts. LOOM_BLAS_FIX=0 disables it. Returns only when no re-execution happened.
void ensure_fast_openblas(char** argv);

// Sets OpenBLAS's own thread count (it starts one thread per core unless OPENBLAS_NUM_THREADS
// was set before it loaded, and torch::set_num_threads does not reach it). Every process that
// computes as one rank calls it with the rank's thread count: a rank started by a bare
// `mpirun`, or `loom profile`, would otherwise run its matrix products on every core. Returns
// false when the BLAS in use is not OpenBLAS.
bool set_openblas_threads(int n);

}  // namespace loom
