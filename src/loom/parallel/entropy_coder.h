#pragma once
// Lossless coding of byte strings, for quantized codes (quantize.h), which are far from
// uniform: most values sit near zero, so 4-bit codes carry 2-3 bits of information. zstd at
// level 1: on such codes (few repeats to match) its output is essentially the Huffman coding
// of the bytes, and it codes 4x faster than zlib's Huffman-only deflate (260 against
// 60 MB/s, 1.1 GB/s decoding, on this machine's 4-bit codes). A coder keeps zstd's contexts
// between calls (one per thread).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::parallel {

class EntropyCoder {
 public:
  EntropyCoder();
  ~EntropyCoder();
  EntropyCoder(const EntropyCoder&) = delete;
  EntropyCoder& operator=(const EntropyCoder&) = delete;

  // Appends the coded form of in[0, n) to out.
  void pack(const uint8_t* in, size_t n, std::vector<uint8_t>& out);
  // Decodes in[0, n) into exactly `expected` bytes at out; throws loom::Error when the stream
  // is corrupt or decodes to another length.
  void unpack(const uint8_t* in, size_t n, uint8_t* out, size_t expected);

 private:
  struct Contexts;
  std::unique_ptr<Contexts> z_;
};

}  // namespace loom::parallel
