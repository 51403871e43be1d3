// The entropy coder of --quant.entropy: round trips of skewed, uniform, empty and one-byte
// strings, the size it reaches on skewed codes, and a corrupt or short stream refused.
#include "loom/parallel/entropy_coder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loom/common/error.h"

using loom::parallel::EntropyCoder;

namespace {

std::vector<uint8_t> round_trip(EntropyCoder& h, const std::vector<uint8_t>& in,
                                size_t* coded = nullptr) {
  std::vector<uint8_t> packed = {0xAB};  // pack() appends
  h.pack(in.data(), in.size(), packed);
  EXPECT_EQ(packed[0], 0xAB);
  if (coded) *coded = packed.size() - 1;
  std::vector<uint8_t> out(in.size(), 0x55);
  h.unpack(packed.data() + 1, packed.size() - 1, out.data(), out.size());
  return out;
}

// Bytes of two 4-bit codes, each drawn from round(N(0, 1.2)) clamped to [-7, 7].
std::vector<uint8_t> skewed_nibbles(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, 1.2);
  auto code = [&] {
    return static_cast<uint8_t>(std::clamp<long>(std::lround(g(rng)), -7, 7) & 15);
  };
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(code() | (code() << 4));
  return v;
}

TEST(EntropyCoder, RoundTripsAnyString) {
  EntropyCoder h;  // one coder for every case: its state is reset per call
  std::mt19937 rng(7);
  std::vector<uint8_t> uniform(100000);
  for (auto& b : uniform) b = static_cast<uint8_t>(rng());
  for (const auto& in : {skewed_nibbles(100000, 1), uniform, std::vector<uint8_t>{},
                         std::vector<uint8_t>{42}, std::vector<uint8_t>(70000, 0)})
    EXPECT_EQ(round_trip(h, in), in) << in.size() << " bytes";
}

// Codes of entropy H bits per nibble come out within 3 % of H (zstd's Huffman on byte pairs), far
// below the 8 bits a byte holds; a uniform string costs at most 1 % more than itself.
TEST(EntropyCoder, SkewedCodesShrinkToTheirEntropy) {
  EntropyCoder h;
  const auto in = skewed_nibbles(200000, 3);
  std::vector<double> p(16, 0);
  for (uint8_t b : in) {
    p[b & 15] += 1;
    p[b >> 4] += 1;
  }
  double entropy = 0;  // bits per nibble
  for (double c : p)
    if (c > 0) entropy -= c / (2.0 * in.size()) * std::log2(c / (2.0 * in.size()));
  size_t coded = 0;
  round_trip(h, in, &coded);
  const double bits_per_nibble = 8.0 * double(coded) / (2.0 * double(in.size()));
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 3.0);
  EXPECT_LE(bits_per_nibble, entropy * 1.03);
  std::mt19937 rng(9);
  std::vector<uint8_t> uniform(100000);
  for (auto& b : uniform) b = static_cast<uint8_t>(rng());
  round_trip(h, uniform, &coded);
  EXPECT_LE(coded, uniform.size() * 101 / 100);
}

TEST(EntropyCoder, CorruptOrShortStreamIsAnError) {
  EntropyCoder h;
  const auto in = skewed_nibbles(5000, 5);
  std::vector<uint8_t> packed;
  h.pack(in.data(), in.size(), packed);
  std::vector<uint8_t> out(in.size());
  // Expecting more (or fewer) bytes than were coded.
  EXPECT_THROW(h.unpack(packed.data(), packed.size(), out.data(), out.size() - 1), loom::Error);
  out.resize(in.size() + 1);
  EXPECT_THROW(h.unpack(packed.data(), packed.size(), out.data(), out.size()), loom::Error);
  // A truncated stream.
  out.resize(in.size());
  EXPECT_THROW(h.unpack(packed.data(), packed.size() / 2, out.data(), out.size()), loom::Error);
  // The coder still works after a failure.
  EXPECT_EQ(round_trip(h, in), in);
}

}  // namespace
