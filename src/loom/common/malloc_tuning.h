#pragma once

namespace loom {

// Keeps freed tensor memory in the process heap instead of returning it to the kernel.
//
// A training step allocates and frees the same activation and gradient buffers every step.
// glibc serves blocks above its mmap threshold (128 KiB at first, adjusted as blocks are freed)
// with fresh mmap'ed pages and trims the heap top when it exceeds the trim threshold; either way
// the next step page-faults (and zero-fills) the same memory again. Measured on the 4-layer GPT of
// bench/ddp_compare.sh: ~13,000 page faults per step and ~5% of the step time
// (docs/notes/results.md). Raising both thresholds makes the steady state fault-free. Does nothing
// when the user already tunes malloc through the environment (GLIBC_TUNABLES with glibc.malloc, or
// MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_), or when LOOM_MALLOC_TUNING=0. Returns whether
// it applied.
bool tune_malloc_for_training();

}  // namespace loom
