// The quantizer of --dp-mode quant on hand-computed examples. Scales are powers of two where
// possible so that every expected value is exact; where a value is not representable the
// expectation is written as the float expression it must equal bit for bit.
#include "loom/parallel/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace loom::parallel::quant;

namespace {

std::vector<float> roundtrip(const std::vector<float>& x, const Format& f,
                             std::vector<uint8_t>* bytes = nullptr) {
  std::vector<uint8_t> enc(encoded_bytes(static_cast<int64_t>(x.size()), f));
  encode(x.data(), static_cast<int64_t>(x.size()), f, enc.data());
  std::vector<float> out(x.size());
  decode(enc.data(), static_cast<int64_t>(x.size()), f, out.data());
  if (bytes) *bytes = enc;
  return out;
}

}  // namespace

TEST(Quantize, SizesOfEncodedChunks) {
  EXPECT_EQ(qmax(8), 127);
  EXPECT_EQ(qmax(4), 7);
  EXPECT_EQ(encoded_bytes(256, {8, 256}), 4 + 256);
  EXPECT_EQ(encoded_bytes(257, {8, 256}), 2 * 4 + 257);  // a short last block
  EXPECT_EQ(encoded_bytes(256, {4, 256}), 4 + 128);
  EXPECT_EQ(encoded_bytes(5, {4, 2}), 3 * 4 + 3);  // odd count: the last high nibble unused
  EXPECT_EQ(encoded_bytes(0, {8, 256}), 0);
}

// Block of 4, 8 bits: max 7.9375 = 127/16, so the scale is exactly 1/16.
TEST(Quantize, EightBitHandExample) {
  Format f{8, 4};
  std::vector<float> x = {7.9375f, -1.0f, 0.03f, 3.1f};
  std::vector<uint8_t> enc;
  auto y = roundtrip(x, f, &enc);
  float scale;
  std::memcpy(&scale, enc.data(), 4);
  EXPECT_EQ(scale, 0.0625f);
  // Codes: 127, -16, round(0.48) = 0, round(49.6) = 50.
  EXPECT_EQ(static_cast<int8_t>(enc[4]), 127);
  EXPECT_EQ(static_cast<int8_t>(enc[5]), -16);
  EXPECT_EQ(static_cast<int8_t>(enc[6]), 0);
  EXPECT_EQ(static_cast<int8_t>(enc[7]), 50);
  EXPECT_EQ(y, (std::vector<float>{7.9375f, -1.0f, 0.0f, 3.125f}));
  // The residual e = x - dequant(quant(x)) of error feedback.
  EXPECT_EQ(x[2] - y[2], 0.03f);
  EXPECT_EQ(x[3] - y[3], 3.1f - 3.125f);
}

TEST(Quantize, HalfwayRoundsAwayFromZeroAndZeroBlocks) {
  Format f{8, 2};
  // Block 1: max 3.96875 = 127/32, 0.265625 / (1/32) = 8.5 -> 9. Block 2: zeros, scale 0.
  auto y = roundtrip({0.265625f, -3.96875f, 0.0f, 0.0f}, f);
  EXPECT_EQ(y, (std::vector<float>{0.28125f, -3.96875f, 0.0f, 0.0f}));
  y = roundtrip({-0.265625f, 3.96875f}, f);
  EXPECT_EQ(y[0], -0.28125f);
}

// 4 bits, blocks of 2: scale = max / 7. Nibbles in two's complement, low nibble first.
TEST(Quantize, FourBitPacksTwoValuesPerByte) {
  Format f{4, 2};
  std::vector<float> x = {1.75f, -0.75f, -0.5f, 0.0f, 0.4375f};  // scales 0.25, 1/14, 0.0625
  std::vector<uint8_t> enc;
  auto y = roundtrip(x, f, &enc);
  ASSERT_EQ(enc.size(), 3u * 4 + 3);
  // Codes: 7, -3 | -7, 0 | 7 (odd count).
  EXPECT_EQ(enc[12], 0xD7);  // -3 = 0xD high, 7 low
  EXPECT_EQ(enc[13], 0x09);  // 0 high, -7 = 0x9 low
  EXPECT_EQ(enc[14], 0x07);
  EXPECT_EQ(y[0], 1.75f);
  EXPECT_EQ(y[1], -0.75f);
  EXPECT_EQ(y[2], -7.0f * (0.5f / 7.0f));
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 0.4375f);
}

// 2 bits, blocks of 3: scale = max / 1, ternary codes -1, 0, 1 (a value rounds to +-1 from half
// the block's maximum), four codes a byte, value 4k + j at bits 2j..2j+1.
TEST(Quantize, TwoBitTernaryPacksFourValuesPerByte) {
  EXPECT_EQ(qmax(2), 1);
  Format f{2, 3};
  EXPECT_EQ(encoded_bytes(5, f), 2 * 4 + 2);
  std::vector<float> x = {-2.0f, 1.0f, 0.9f, 0.5f, -0.25f};  // scales 2, 0.5
  std::vector<uint8_t> enc;
  auto y = roundtrip(x, f, &enc);
  ASSERT_EQ(enc.size(), 10u);
  // Codes: -1, 1 (0.5 rounds away from zero), 0 | 1, -1.
  EXPECT_EQ(enc[8], 0x03 | (0x01 << 2) | (0x00 << 4) | (0x01 << 6));
  EXPECT_EQ(enc[9], 0x03);
  EXPECT_EQ(y, (std::vector<float>{-2.0f, 2.0f, 0.0f, 0.5f, -0.5f}));
}

// 3 bits, one block of 4: scale = max / 3; the codes make a bit stream, low bits first, the
// third code straddling bytes 0 and 1.
TEST(Quantize, ThreeBitCodesStraddleBytes) {
  EXPECT_EQ(qmax(3), 3);
  Format f{3, 4};
  EXPECT_EQ(encoded_bytes(4, f), 4 + 2);              // 12 bits
  std::vector<float> x = {3.0f, -2.0f, 1.0f, -3.0f};  // scale 1: codes 3, -2, 1, -3
  std::vector<uint8_t> enc;
  auto y = roundtrip(x, f, &enc);
  ASSERT_EQ(enc.size(), 6u);
  // Stream: 011 | 110 | 001 | 101 (code i at bits 3i..3i+2).
  const unsigned stream = 0x3u | (0x6u << 3) | (0x1u << 6) | (0x5u << 9);
  EXPECT_EQ(enc[4], stream & 0xFF);
  EXPECT_EQ(enc[5], stream >> 8);
  EXPECT_EQ(y, x);
}

TEST(Quantize, CodesStayInRangeAndDecodeAddsInFp32) {
  Format f{8, 3};
  std::vector<float> x = {1.0f, 0.3f, -0.2f};  // scale 1/127: codes 127, round(38.1), round(-25.4)
  std::vector<uint8_t> enc(encoded_bytes(3, f));
  encode(x.data(), 3, f, enc.data());
  EXPECT_EQ(static_cast<int8_t>(enc[4]), 127);
  EXPECT_EQ(static_cast<int8_t>(enc[5]), 38);
  EXPECT_EQ(static_cast<int8_t>(enc[6]), -25);
  std::vector<float> acc = {10.0f, 20.0f, 30.0f};
  decode_add(enc.data(), 3, f, acc.data());
  const float s = 1.0f / 127.0f;
  EXPECT_EQ(acc[0], 10.0f + 127.0f * s);
  EXPECT_EQ(acc[1], 20.0f + 38.0f * s);
  EXPECT_EQ(acc[2], 30.0f + -25.0f * s);
  // Non-finite input never produces an out-of-range code.
  std::vector<float> bad = {INFINITY, 1.0f, NAN};
  encode(bad.data(), 3, f, enc.data());
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::abs(static_cast<int8_t>(enc[4 + i])), 127);
}

// Error feedback over two steps on the pure functions: the residual of step 1 is added to the
// gradient of step 2, and the new residual is what step 2's quantization left out.
TEST(Quantize, ErrorFeedbackCarriesTheResidual) {
  Format f{8, 2};
  std::vector<float> grad = {0.03f, 3.96875f};  // scale 1/32
  std::vector<float> e = {0, 0};
  for (int step = 0; step < 2; ++step) {
    std::vector<float> x = {grad[0] + e[0], grad[1] + e[1]};
    auto y = roundtrip(x, f);
    e = {x[0] - y[0], x[1] - y[1]};
    EXPECT_EQ(y[0], 0.03125f) << "step " << step;  // 0.96 -> 1, then 0.92 -> 1
  }
  const float e1 = 0.03f - 0.03125f;
  EXPECT_EQ(e[0], (0.03f + e1) - 0.03125f);
  EXPECT_EQ(e[1], 0.0f);
}

// The fast paths (eight running maxima, whole-byte packing, the 2-bit table) against the
// definition, value by value: random values with NaN, infinities and zero blocks, every width,
// counts and blocks that are not multiples of a byte's codes or of the eight lanes.
TEST(Quantize, FastPathsMatchTheDefinition) {
  std::srand(7);
  for (int bits : {2, 3, 4, 8})
    for (int64_t block : {1, 5, 64, 256})
      for (int64_t count : {1, 3, 7, 8, 9, 33, 1001}) {
        const Format f{bits, block};
        std::vector<float> x(count);
        for (auto& v : x) v = static_cast<float>(std::rand() % 2001 - 1000) / 97.0f;
        if (count > 8) {
          x[2] = NAN;
          x[5] = -INFINITY;
          for (int64_t i = 0; i < std::min<int64_t>(block, count); ++i) x[i] = 0;  // a zero block
        }
        std::vector<uint8_t> enc;
        const std::vector<float> y = roundtrip(x, f, &enc);
        std::vector<float> acc(count, 1.0f);
        decode_add(enc.data(), count, f, acc.data());
        const float q = static_cast<float>(qmax(bits));
        for (int64_t b = 0; b * block < count; ++b) {
          const int64_t lo = b * block, hi = std::min(count, lo + block);
          float amax = 0;
          for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[i]));
          const float s = amax / q;
          for (int64_t i = lo; i < hi; ++i) {
            float code = 0;
            if (s > 0 && !std::isnan(x[i])) code = std::round(std::clamp(x[i] / s, -q, q));
            // A block holding an infinity has an infinite scale: 0 * inf is NaN both ways.
            auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
            ASSERT_PRED2(same, y[i], code * s)
                << "bits " << bits << " block " << block << " count " << count << " i " << i;
            ASSERT_PRED2(same, acc[i], 1.0f + code * s)
                << "decode_add, bits " << bits << " i " << i;
          }
        }
      }
}

// rms_clip: the scale follows the block's RMS, the outlier gets the largest code and the rest a
// finer grid. x = [4, 1, -1, 1], rms = sqrt(19 / 4) (exact in float: sqrt(4.75) rounded),
// s = min(4, 1 * rms) / 3: 4 / s = 5.5 is clipped to 3, the ones are 1.38 -> code 1.
TEST(Quantize, ClipScalesToTheRms) {
  Format f{3, 4};
  f.rms_clip = 1.0f;
  const std::vector<float> x = {4.0f, 1.0f, -1.0f, 1.0f};
  std::vector<uint8_t> enc;
  const std::vector<float> y = roundtrip(x, f, &enc);
  float s = 0;
  std::memcpy(&s, enc.data(), sizeof s);
  EXPECT_EQ(s, std::sqrt(4.75f) / 3.0f);
  EXPECT_EQ(y, (std::vector<float>{3 * s, s, -s, s}));
  f.rms_clip = 0;  // the largest value: 4 / 3
  roundtrip(x, f, &enc);
  std::memcpy(&s, enc.data(), sizeof s);
  EXPECT_EQ(s, 4.0f / 3.0f);
}
