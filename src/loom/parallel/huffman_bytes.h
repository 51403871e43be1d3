#pragma once
// Huffman coding of byte strings, for quantized codes (quantize.h), which are far from uniform:
// most values sit near zero, so 4-bit codes carry 2-3 bits of information. zlib's deflate
// restricted to Huffman coding (Z_HUFFMAN_ONLY, a raw stream: no string matching, no header),
// a code built per deflate block of up to 32 Ki symbols. A coder keeps zlib's state between
// calls (one per thread).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::parallel {

class HuffmanBytes {
 public:
  HuffmanBytes();
  ~HuffmanBytes();
  HuffmanBytes(const HuffmanBytes&) = delete;
  HuffmanBytes& operator=(const HuffmanBytes&) = delete;

  // Appends the coded form of in[0, n) to out.
  void pack(const uint8_t* in, size_t n, std::vector<uint8_t>& out);
  // Decodes in[0, n) into exactly `expected` bytes at out; throws loom::Error when the stream
  // is corrupt or decodes to another length.
  void unpack(const uint8_t* in, size_t n, uint8_t* out, size_t expected);

 private:
  struct Streams;
  std::unique_ptr<Streams> z_;
};

}  // namespace loom::parallel
