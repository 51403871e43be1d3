#include "loom/parallel/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/common/error.h"

namespace loom::parallel::quant {
namespace {

void check(const Format& f) {
  LOOM_CHECK(f.bits == 8 || f.bits == 4, "quantization bits must be 4 or 8, got ", f.bits);
  LOOM_CHECK(f.block >= 1, "quantization block must be >= 1, got ", f.block);
}

int64_t code_bytes(int64_t count, int bits) { return (count * bits + 7) / 8; }

// Code of value i (sign-extended), from the packed codes.
inline int code_at(const uint8_t* codes, int64_t i, int bits) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  int nib = (codes[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

template <typename Store>
void decode_with(const uint8_t* in, int64_t count, const Format& f, Store store) {
  check(f);
  const int64_t nb = num_blocks(count, f);
  const uint8_t* codes = in + nb * sizeof(float);
  for (int64_t b = 0; b < nb; ++b) {
    float s;
    std::memcpy(&s, in + b * sizeof(float), sizeof s);
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    for (int64_t i = lo; i < hi; ++i) store(i, static_cast<float>(code_at(codes, i, f.bits)) * s);
  }
}

}  // namespace

int qmax(int bits) { return (1 << (bits - 1)) - 1; }

int64_t num_blocks(int64_t count, const Format& f) { return (count + f.block - 1) / f.block; }

int64_t encoded_bytes(int64_t count, const Format& f) {
  check(f);
  return num_blocks(count, f) * static_cast<int64_t>(sizeof(float)) + code_bytes(count, f.bits);
}

void encode(const float* x, int64_t count, const Format& f, uint8_t* out) {
  check(f);
  const int64_t nb = num_blocks(count, f);
  const int q = qmax(f.bits);
  uint8_t* codes = out + nb * sizeof(float);
  if (f.bits == 4) std::memset(codes, 0, code_bytes(count, 4));
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * f.block, hi = std::min(count, lo + f.block);
    float amax = 0;
    for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax / static_cast<float>(q);
    std::memcpy(out + b * sizeof(float), &s, sizeof s);
    for (int64_t i = lo; i < hi; ++i) {
      // x / s rather than x * (1 / s): the code of the block maximum is exactly qmax.
      // Clamped as a float first so that inf or NaN never reach the integer conversion.
      const float r = s > 0 ? std::round(x[i] / s) : 0.0f;
      const int c = r >= q ? q : r <= -q ? -q : (r == r ? static_cast<int>(r) : 0);
      if (f.bits == 8)
        codes[i] = static_cast<uint8_t>(static_cast<int8_t>(c));
      else
        codes[i >> 1] |= static_cast<uint8_t>((c & 0xF) << ((i & 1) * 4));
    }
  }
}

void decode(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_with(in, count, f, [out](int64_t i, float v) { out[i] = v; });
}

void decode_add(const uint8_t* in, int64_t count, const Format& f, float* out) {
  decode_with(in, count, f, [out](int64_t i, float v) { out[i] += v; });
}

}  // namespace loom::parallel::quant
