#include "loom/parallel/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// round(x / s) half away from zero, clamped to [-q, q]; NaN gives 0. All in float, without a
// libm call, so that the loop vectorizes: for 0 <= a <= q, a - trunc(a) is exact, so comparing
// it with 0.5 rounds exactly as std::round does.
void codes_of(const float* x, int64_t n, float s, float qf, int8_t* c) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / s;
    float a = std::fabs(v);
    a = a < qf ? a : qf;  // also +inf and NaN -> q; NaN is zeroed below
    const float t = static_cast<float>(static_cast<int>(a));
    const float r = t + ((a - t) >= 0.5f ? 1.0f : 0.0f);
    const float code = v < 0 ? -r : r;
    c[i] = static_cast<int8_t>(static_cast<int>(v == v ? code : 0.0f));
  }
}

// max |x_i| (NaNs ignored, as std::max ignores them): eight running maxima, so that the loop
// vectorizes (a single one is a chain of dependent scalar maxima).
float abs_max(const float* x, int64_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = std::max(m[j], std::fabs(x[i + j]));
  for (; i < n; ++i) m[0] = std::max(m[0], std::fabs(x[i]));
  return *std::max_element(m, m + 8);
}

// sqrt(mean x_i^2), in eight running sums as abs_max.
float rms(const float* x, int64_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] += x[i + j] * x[i + j];
  for (; i < n; ++i) m[0] += x[i] * x[i];
  float sum = 0;
  for (float v : m) sum += v;
  return std::sqrt(sum / static_cast<float>(n));
}

// Below 8 bits: a stream of `bits`-bit two's-complement codes, value i at stream bit
// i * bits, low bits first. With 2 and 4 bits a byte holds whole codes: loops over bytes with
// the width known at compile time, which vectorize; a 3-bit code may straddle two bytes.
template <int kBits>
void pack_whole(const int8_t* c, int64_t count, uint8_t* codes) {
  constexpr int kPer = 8 / kBits;
  constexpr unsigned kMask = (1u << kBits) - 1;
  const int64_t full = count / kPer;
  for (int64_t k = 0; k < full; ++k) {
    unsigned b = 0;
    for (int j = 0; j < kPer; ++j)
      b |= (static_cast<unsigned>(c[k * kPer + j]) & kMask) << (j * kBits);
    codes[k] = static_cast<uint8_t>(b);
  }
  if (full * kPer == count) return;
  unsigned b = 0;
  for (int64_t i = full * kPer; i < count; ++i)
    b |= (static_cast<unsigned>(c[i]) & kMask) << ((i - full * kPer) * kBits);
  codes[full] = static_cast<uint8_t>(b);
}

void pack(const int8_t* c, int64_t count, int bits, uint8_t* codes) {
  if (bits == 2) return pack_whole<2>(c, count, codes);
  if (bits == 4) return pack_whole<4>(c, count, codes);
  std::memset(codes, 0, code_bytes(count, bits));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = i * bits;
    const int shift = static_cast<int>(at & 7);
    const unsigned v = (static_cast<unsigned>(c[i]) & ((1u << bits) - 1)) << shift;
    codes[at >> 3] |= static_cast<uint8_t>(v & 0xFF);
    if (shift + bits > 8) codes[(at >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
  }
}

// Code of value i (sign-extended) in a stream of any width.
inline int code_at(const uint8_t* codes, int64_t i, int bits) {
  const int64_t at = i * bits;
  const int shift = static_cast<int>(at & 7), mask = (1 << bits) - 1;
  unsigned window = codes[at >> 3];
  if (shift + bits > 8) window |= static_cast<unsigned>(codes[(at >> 3) + 1]) << 8;
  const int v = static_cast<int>(window >> shift) & mask;
  return v > mask / 2 ? v - (mask + 1) : v;
}

// Code j of a byte of whole codes: shifted to the top, then arithmetically down.
template <int kBits>
constexpr int8_t code_in_byte(uint8_t b, int j) {
  return static_cast<int8_t>(static_cast<int8_t>(b << (8 - kBits - j * kBits)) >> (8 - kBits));
}

// The codes of every byte, for widths whose per-byte loop does not vectorize (2 bits).
template <int kBits>
struct ByteCodes {
  static constexpr int kPer = 8 / kBits;
  int8_t codes[256][kPer] = {};
  constexpr ByteCodes() {
    for (int b = 0; b < 256; ++b)
      for (int j = 0; j < kPer; ++j) codes[b][j] = code_in_byte<kBits>(static_cast<uint8_t>(b), j);
  }
};

template <int kBits>
void unpack_whole(const uint8_t* codes, int64_t count, int8_t* c) {
  constexpr int kPer = 8 / kBits;
  const int64_t full = count / kPer;
  if constexpr (kBits == 2) {
    static constexpr ByteCodes<2> kTable;
    for (int64_t k = 0; k < full; ++k) std::memcpy(c + k * kPer, kTable.codes[codes[k]], kPer);
  } else {
    for (int64_t k = 0; k < full; ++k)
      for (int j = 0; j < kPer; ++j) c[k * kPer + j] = code_in_byte<kBits>(codes[k], j);
  }
  for (int64_t i = full * kPer; i < count; ++i)
    c[i] = code_in_byte<kBits>(codes[full], static_cast<int>(i - full * kPer));
}

// The inverse of pack: sign-extended codes.
void unpack(const uint8_t* codes, int64_t count, int bits, int8_t* c) {
  if (bits == 2) return unpack_whole<2>(codes, count, c);
  if (bits == 4) return unpack_whole<4>(codes, count, c);
  for (int64_t i = 0; i < count; ++i) c[i] = static_cast<int8_t>(code_at(codes, i, bits));
}

// Scratch codes for the packed widths (one buffer per thread, grown as needed).
int8_t* scratch(int64_t count) {
  thread_local std::vector<int8_t> buf;
  if (static_cast<int64_t>(buf.size()) < count) buf.resize(count);
  return buf.data();
}

template <bool kAdd>
void decode_impl(const uint8_t* in, int64_t count, const Format& f, float* out) {
  check(f);
  const int64_t nb = num_blocks(count, f);
  const uint8_t* codes = in + nb * sizeof(float);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  if (f.bits < 8) {
    int8_t* u = scratch(count);
    unpack(codes, count, f.bits, u);
    c = u;
  }
  for (int64_t b = 0; b < nb; ++b) {
    float s;
    std::memcpy(&s, in + b * sizeof(float), sizeof s);
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    for (int64_t i = lo; i < hi; ++i) {
      const float v = static_cast<float>(c[i]) * s;
      out[i] = kAdd ? out[i] + v : v;
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
  const auto qf = static_cast<float>(qmax(f.bits));
  uint8_t* codes = out + nb * sizeof(float);
  int8_t* c = f.bits == 8 ? reinterpret_cast<int8_t*>(codes) : scratch(count);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    float top = abs_max(x + lo, hi - lo);
    if (f.rms_clip > 0) top = std::min(top, f.rms_clip * rms(x + lo, hi - lo));  // NaN: top stays
    const float s = top / qf;
    std::memcpy(out + b * sizeof(float), &s, sizeof s);
    if (s > 0)  // x / s rather than x * (1 / s): the code of the block maximum is exactly qmax
      codes_of(x + lo, hi - lo, s, qf, c + lo);
    else  // a block of zeros (or NaN): codes 0
      std::memset(c + lo, 0, hi - lo);
  }
  if (f.bits < 8) pack(c, count, f.bits, codes);
}

void decode(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_impl<false>(in, count, f, out);
}

void decode_add(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_impl<true>(in, count, f, out);
}

}  // namespace loom::parallel::quant
