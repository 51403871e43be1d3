#include "loom/parallel/entropy_coder.h"

#include <zstd.h>

#include "loom/common/error.h"

namespace loom::parallel {

struct EntropyCoder::Contexts {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ~Contexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};

EntropyCoder::EntropyCoder() : z_(std::make_unique<Contexts>()) {
  LOOM_CHECK(z_->c != nullptr && z_->d != nullptr, "zstd: cannot create its contexts");
}

EntropyCoder::~EntropyCoder() = default;

void EntropyCoder::pack(const uint8_t* in, size_t n, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  out.resize(start + ZSTD_compressBound(n));
  const size_t got = ZSTD_compressCCtx(z_->c, out.data() + start, out.size() - start, in, n, 1);
  LOOM_CHECK(!ZSTD_isError(got), "zstd: ", ZSTD_getErrorName(got));
  out.resize(start + got);
}

void EntropyCoder::unpack(const uint8_t* in, size_t n, uint8_t* out, size_t expected) {
  // Room for exactly `expected`: a stream that decodes to more fails (dstSize_tooSmall).
  const size_t got = ZSTD_decompressDCtx(z_->d, out, expected, in, n);
  LOOM_CHECK(!ZSTD_isError(got) && got == expected, "coded piece of ", n, " bytes is corrupt: ",
             ZSTD_isError(got)
                 ? std::string("zstd: ") + ZSTD_getErrorName(got)
                 : detail::concat("decoded ", got, " bytes where ", expected, " were expected"));
}

}  // namespace loom::parallel
