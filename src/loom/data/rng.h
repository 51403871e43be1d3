#pragma once
// Internal helpers on top of splitmix64 (sampler.h): portable, so every rank and every platform
// draws the same numbers from the same seed. Not part of the public contract.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "loom/data/sampler.h"

namespace loom::data::detail {

// One 64-bit seed from a (seed, stream) pair, e.g. (run seed, epoch) or (run seed, sample).
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t state = seed;
  state = splitmix64(state) ^ stream;
  return splitmix64(state);
}

// Uniform integer in [0, bound) without modulo bias (rejects the short last block).
inline uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    const uint64_t r = splitmix64(state);
    if (r >= threshold) return r % bound;
  }
}

// Uniform double in [0, 1) with 53 random bits.
inline double uniform01(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller (one value per call; simpler than caching the pair).
inline float normal(uint64_t& state) {
  const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = uniform01(state);
  const double radius = std::sqrt(-2.0 * std::log(u1));
  return static_cast<float>(radius * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace loom::data::detail
