#include "loom/parallel/huffman_bytes.h"

#include <zlib.h>

#include <limits>

#include "loom/common/error.h"

namespace loom::parallel {

struct HuffmanBytes::Streams {
  z_stream deflate{};
  z_stream inflate{};
};

namespace {

// zlib counts in uInt; the chunks here are far below 4 GiB.
uInt checked_size(size_t n) {
  LOOM_CHECK(n <= std::numeric_limits<uInt>::max(), "Huffman coding: ", n, " bytes in one piece");
  return static_cast<uInt>(n);
}

}  // namespace

HuffmanBytes::HuffmanBytes() : z_(std::make_unique<Streams>()) {
  // Raw deflate (window bits -15), memLevel 9: blocks of 32 Ki symbols, one table each.
  LOOM_CHECK(deflateInit2(&z_->deflate, 1, Z_DEFLATED, -15, 9, Z_HUFFMAN_ONLY) == Z_OK,
             "zlib: deflateInit2 failed");
  LOOM_CHECK(inflateInit2(&z_->inflate, -15) == Z_OK, "zlib: inflateInit2 failed");
}

HuffmanBytes::~HuffmanBytes() {
  deflateEnd(&z_->deflate);
  inflateEnd(&z_->inflate);
}

void HuffmanBytes::pack(const uint8_t* in, size_t n, std::vector<uint8_t>& out) {
  z_stream& s = z_->deflate;
  LOOM_CHECK(deflateReset(&s) == Z_OK, "zlib: deflateReset failed");
  const size_t start = out.size();
  out.resize(start + deflateBound(&s, checked_size(n)));
  s.next_in = const_cast<Bytef*>(in);
  s.avail_in = checked_size(n);
  s.next_out = out.data() + start;
  s.avail_out = checked_size(out.size() - start);
  // deflateBound's room is enough to finish in one call.
  LOOM_CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "zlib: deflate did not finish");
  out.resize(start + s.total_out);
}

void HuffmanBytes::unpack(const uint8_t* in, size_t n, uint8_t* out, size_t expected) {
  z_stream& s = z_->inflate;
  LOOM_CHECK(inflateReset(&s) == Z_OK, "zlib: inflateReset failed");
  s.next_in = const_cast<Bytef*>(in);
  s.avail_in = checked_size(n);
  // zlib makes no progress into no room, even on an empty stream: give that one a spare byte.
  uint8_t spare = 0;
  s.next_out = expected > 0 ? out : &spare;
  s.avail_out = expected > 0 ? checked_size(expected) : 1;
  const int rc = inflate(&s, Z_FINISH);
  LOOM_CHECK(rc == Z_STREAM_END && s.total_out == expected && s.avail_in == 0,
             "Huffman-coded piece of ", n, " bytes is corrupt: decoded ", s.total_out,
             " bytes where ", expected, " were expected (zlib: ", s.msg ? s.msg : "no message",
             ")");
}

}  // namespace loom::parallel
