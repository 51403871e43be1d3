#pragma once
// Blockwise symmetric quantization used by --dp-mode quant (pure functions, no torch, no MPI:
// the unit tests check them on hand-computed examples).
//
// A chunk of `count` values is cut into blocks of `block` values (the last one may be short).
// Each block b has one fp32 scale s_b = max_i |x_i| / qmax with qmax = 2^(bits-1) - 1 (127 for
// 8 bits, 7 for 4 bits, 3 for 3 bits, 1 for 2 bits: ternary codes -1, 0, 1); a value is sent as
// the integer code q = round(x / s_b) (half away from zero) clamped to [-qmax, qmax], and read
// back as q * s_b. A block of zeros has scale 0.
//
// Encoded layout of a chunk: [scales: ceil(count / block) float32][codes]. 8-bit codes are one
// int8 per value; fewer bits make a stream of two's-complement codes, value i at stream bit
// i * bits, low bits first: with 4 bits value 2k is the low nibble and value 2k+1 the high
// nibble of byte k (an odd count leaves the last high nibble 0), with 2 bits value 4k + j sits
// at bits 2j..2j+1 of byte k, and a 3-bit code may straddle two bytes.
#include <cstdint>

namespace loom::parallel::quant {

struct Format {
  int bits = 8;         // 2 .. 8
  int64_t block = 256;  // values per scale
  // > 0: s_b = min(max_i |x_i|, rms_clip * rms_b) / qmax, rms_b = sqrt(mean_i x_i^2): the
  // values beyond rms_clip * rms_b get the largest code (clipped), the others a finer grid.
  float rms_clip = 0;
};

int qmax(int bits);
int64_t num_blocks(int64_t count, const Format& f);
// Bytes of an encoded chunk of `count` values (scales + codes).
int64_t encoded_bytes(int64_t count, const Format& f);

// Writes encoded_bytes(count, f) bytes to out.
void encode(const float* x, int64_t count, const Format& f, uint8_t* out);
// out[i] = dequantized value i.
void decode(const uint8_t* in, int64_t count, const Format& f, float* out);
// out[i] += dequantized value i (sums in fp32).
void decode_add(const uint8_t* in, int64_t count, const Format& f, float* out);

}  // namespace loom::parallel::quant
