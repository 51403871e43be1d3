#pragma once
// LOOM_CPU_CLONES before a function compiles it once per x86-64 instruction set level
// (x86-64-v4: AVX-512; x86-64-v3: AVX2 with FMA; the baseline), and the loader picks the best
// the processor has. For loom's own element-wise kernels: the build targets the baseline, so
// without it their loops would use 128-bit SSE2 on every machine.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOOM_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LOOM_CPU_CLONES
#endif
