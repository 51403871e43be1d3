#include "loom/parallel/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/common/error.h"

namespace loom::parallel::quant {
namespace {

void check(const Format& f) {
  LOOM_CHECK(f.bits >= 2 && f.bits <= 8, "quantization bits must be 2 to 8, got ", f.bits);
  LOOM_CHECK(f.block >= 1, "quantization block must be >= 1, got ", f.block);
}

int64_t code_bytes(int64_t count, int bits) {
  return (count * bits + 7) / 8;
}

// round(x / s) half away from zero, clamped to [-q, q]; NaN gives 0. Written without a libm
// call so that the loop vectorizes: for 0 <= a <= q, a - trunc(a) is exact, so comparing it
// with 0.5 rounds exactly as std::round does.
inline int code_of(float x, float s, float qf) {
  const float v = x / s;
  float a = std::fabs(v);
  a = a < qf ? a : qf;  // also +inf and NaN -> q; NaN is zeroed below
  int i = static_cast<int>(a);
  i += (a - static_cast<float>(i)) >= 0.5f ? 1 : 0;
  i = std::signbit(v) ? -i : i;
  return v == v ? i : 0;
}

// Code of value i (sign-extended), from the packed codes: below 8 bits a stream of `bits`-bit
// two's-complement codes, value i at stream bit i * bits, low bits first (a code may straddle
// two bytes).
inline int code_at(const uint8_t* codes, int64_t i, int bits) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  const int64_t at = i * bits;
  const int shift = static_cast<int>(at & 7), mask = (1 << bits) - 1;
  unsigned window = codes[at >> 3];
  if (shift + bits > 8) window |= static_cast<unsigned>(codes[(at >> 3) + 1]) << 8;
  const int c = static_cast<int>(window >> shift) & mask;
  return c > mask / 2 ? c - (mask + 1) : c;
}

inline void put_code(uint8_t* codes, int64_t i, int bits, int code) {
  const int64_t at = i * bits;
  const int shift = static_cast<int>(at & 7);
  const unsigned v = static_cast<unsigned>(code & ((1 << bits) - 1)) << shift;
  codes[at >> 3] |= static_cast<uint8_t>(v & 0xFF);
  if (shift + bits > 8) codes[(at >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
}

template <bool kAdd>
void decode_impl(const uint8_t* in, int64_t count, const Format& f, float* out) {
  check(f);
  const int64_t nb = num_blocks(count, f);
  const uint8_t* codes = in + nb * sizeof(float);
  for (int64_t b = 0; b < nb; ++b) {
    float s;
    std::memcpy(&s, in + b * sizeof(float), sizeof s);
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    if (f.bits == 8) {
      const auto* c = reinterpret_cast<const int8_t*>(codes);
      for (int64_t i = lo; i < hi; ++i) {
        const float v = static_cast<float>(c[i]) * s;
        out[i] = kAdd ? out[i] + v : v;
      }
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        const float v = static_cast<float>(code_at(codes, i, f.bits)) * s;
        out[i] = kAdd ? out[i] + v : v;
      }
    }
  }
}

}  // namespace

int qmax(int bits) {
  return (1 << (bits - 1)) - 1;
}

int64_t num_blocks(int64_t count, const Format& f) {
  return (count + f.block - 1) / f.block;
}

int64_t encoded_bytes(int64_t count, const Format& f) {
  check(f);
  return num_blocks(count, f) * static_cast<int64_t>(sizeof(float)) + code_bytes(count, f.bits);
}

void encode(const float* x, int64_t count, const Format& f, uint8_t* out) {
  check(f);
  const int64_t nb = num_blocks(count, f);
  const int q = qmax(f.bits);
  const auto qf = static_cast<float>(q);
  uint8_t* codes = out + nb * sizeof(float);
  std::memset(codes, 0, code_bytes(count, f.bits));
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    float amax = 0;
    for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax / qf;
    std::memcpy(out + b * sizeof(float), &s, sizeof s);
    if (!(s > 0)) continue;  // a block of zeros: codes 0 (already cleared)
    // x / s rather than x * (1 / s): the code of the block maximum is exactly qmax.
    if (f.bits == 8) {
      auto* c = reinterpret_cast<int8_t*>(codes);
      for (int64_t i = lo; i < hi; ++i) c[i] = static_cast<int8_t>(code_of(x[i], s, qf));
    } else {
      for (int64_t i = lo; i < hi; ++i) put_code(codes, i, f.bits, code_of(x[i], s, qf));
    }
  }
}

void decode(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_impl<false>(in, count, f, out);
}

void decode_add(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_impl<true>(in, count, f, out);
}

}  // namespace loom::parallel::quant
