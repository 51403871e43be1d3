#pragma once
// Counts the bytes libtorch holds on the CPU, exactly: a wrapper around the default CPU
// allocator records every allocation and free (installed once per process with a priority
// above the default). The runtime's memory accounting (activations = live bytes beyond the
// parameters, gradients and optimizer state) and the simulator's memory checks use it.
// A rank that computes on a GPU reads the same figures from the device's caching allocator
// (bytes handed out to tensors, not the cache it reserves) after track_device().
#include <cstdint>

namespace loom::parallel {

class MemoryTracker {
 public:
  static void install();  // idempotent
  static bool installed();
  static void track_device(int index);  // from now on: the accelerator `index`'s allocator
  static int64_t
  live_bytes();  // currently allocated through libtorch's CPU allocator (or the device's)
  static int64_t peak_bytes();  // since the last reset_peak()
  static void reset_peak();
};

}  // namespace loom::parallel
