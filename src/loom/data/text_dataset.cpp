// Text from a file or a folder tree, as bytes (kept in memory, one byte each) or as the ids of a
// SentencePiece tokenizer (memory-mapped from the token cache). Windows are cut in get().
#include <algorithm>
#include <cmath>
#include <utility>

#include "loom/common/error.h"
#include "loom/data/dataset.h"
#include "loom/data/text_files.h"
#include "loom/data/token_cache.h"

namespace loom::data {
namespace {

// Sample i is the window of seq_len + 1 tokens starting at token i * seq_len of `tokens`.
template <typename T>
class Windows : public Dataset {
 public:
  Windows(std::span<const T> tokens, int64_t seq_len, double bytes_per_token, std::string what)
      : tokens_(tokens),
        seq_len_(seq_len),
        n_((static_cast<int64_t>(tokens.size()) - 1) / seq_len),
        bytes_per_token_(bytes_per_token),
        what_(std::move(what)) {}

  int64_t size() const override { return n_; }

  Batch get(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Batch b;
    for (Array* a : {&b.input, &b.target}) {
      a->type = ElemType::Int64;
      a->shape = {n, seq_len_};
      a->i64.resize(n * seq_len_);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = indices[k];
      LOOM_CHECK(i >= 0 && i < n_, "sample index ", i, " outside [0, ", n_, ")");
      const T* src = tokens_.data() + i * seq_len_;
      int64_t* in = b.input.i64.data() + k * seq_len_;
      int64_t* out = b.target.i64.data() + k * seq_len_;
      for (int64_t t = 0; t < seq_len_; ++t) {
        in[t] = src[t];
        out[t] = src[t + 1];
      }
    }
    return b;
  }

  double bytes_per_token() const override { return bytes_per_token_; }

  std::string describe() const override {
    return what_ + ", " + std::to_string(n_) + " samples of " + std::to_string(seq_len_) +
           " tokens";
  }

 private:
  std::span<const T> tokens_;
  int64_t seq_len_;
  int64_t n_;
  double bytes_per_token_;
  std::string what_;
};

// Byte-level: the windows own the bytes of their split.
class ByteWindows : public Windows<uint8_t> {
 public:
  ByteWindows(std::vector<uint8_t> bytes, int64_t seq_len, std::string what)
      : Windows<uint8_t>(bytes, seq_len, 1.0, std::move(what)), bytes_(std::move(bytes)) {}

 private:
  std::vector<uint8_t> bytes_;  // moving a vector keeps its buffer: the span stays valid
};

// Tokens: the windows keep the mapped cache alive.
class TokenWindows : public Windows<uint32_t> {
 public:
  TokenWindows(std::shared_ptr<const TokenCache> cache, std::span<const uint32_t> tokens,
               int64_t seq_len, double bytes_per_token, std::string what)
      : Windows<uint32_t>(tokens, seq_len, bytes_per_token, std::move(what)),
        cache_(std::move(cache)) {}

 private:
  std::shared_ptr<const TokenCache> cache_;
};

const char* split_name(Split split) {
  return split == Split::Train ? "train" : "test";
}

void check_long_enough(const std::string& path, Split split, int64_t have, int64_t seq_len,
                       const char* unit) {
  if (have < seq_len + 1)
    LOOM_USAGE("text: ", path, " is too short: its ", split_name(split), " split has ", have, " ",
               unit, " but one sample needs seq_len + 1 = ", seq_len + 1,
               "; use more text or a smaller seq_len");
}

std::string files_text(int64_t n) {
  return std::to_string(n) + (n == 1 ? " file" : " files");
}

std::unique_ptr<Dataset> open_bytes(const std::string& path, int64_t seq_len, Split split,
                                    double test_fraction) {
  const std::vector<std::filesystem::path> files = text_files(path);
  std::string text;
  for (const auto& f : files) append_file(f, text);
  const auto total = static_cast<int64_t>(text.size());
  const auto test_bytes = static_cast<int64_t>(static_cast<double>(total) * test_fraction);
  const int64_t begin = split == Split::Train ? 0 : total - test_bytes;
  const int64_t end = split == Split::Train ? total - test_bytes : total;
  check_long_enough(path, split, end - begin, seq_len, "bytes");
  std::vector<uint8_t> bytes(text.begin() + begin, text.begin() + end);
  const std::string what = "text " + std::string(split_name(split)) + " (" + path + ", " +
                           files_text(static_cast<int64_t>(files.size())) +
                           "): " + std::to_string(bytes.size()) + " bytes";
  return std::make_unique<ByteWindows>(std::move(bytes), seq_len, what);
}

// The split is cut at the line end (a cache boundary) nearest to where the byte-level split
// would be, so that its bytes, and so its bytes per token, are exact.
std::unique_ptr<Dataset> open_tokens(const std::string& path, const std::string& tokenizer,
                                     int64_t seq_len, Split split, double test_fraction) {
  std::shared_ptr<const TokenCache> cache = TokenCache::open(path, tokenizer);
  const auto total = static_cast<int64_t>(cache->bytes());
  const auto cut_at = total - static_cast<int64_t>(static_cast<double>(total) * test_fraction);
  const std::span<const TokenCache::Boundary> bounds = cache->boundaries();
  const TokenCache::Boundary cut =
      *std::min_element(bounds.begin(), bounds.end(),
                        [&](const TokenCache::Boundary& a, const TokenCache::Boundary& b) {
                          return std::abs(static_cast<int64_t>(a.byte) - cut_at) <
                                 std::abs(static_cast<int64_t>(b.byte) - cut_at);
                        });
  const bool train = split == Split::Train;
  const std::span<const uint32_t> all = cache->tokens();
  const std::span<const uint32_t> tokens = train ? all.first(cut.token) : all.subspan(cut.token);
  const uint64_t bytes = train ? cut.byte : cache->bytes() - cut.byte;
  check_long_enough(path, split, static_cast<int64_t>(tokens.size()), seq_len, "tokens");
  const double bytes_per_token = double(bytes) / double(tokens.size());
  const std::string what = "text " + std::string(split_name(split)) + " (" + path + ", " +
                           files_text(cache->files()) + ", " + tokenizer +
                           "): " + std::to_string(bytes) + " bytes as " +
                           std::to_string(tokens.size()) + " tokens";
  return std::make_unique<TokenWindows>(std::move(cache), tokens, seq_len, bytes_per_token, what);
}

}  // namespace

std::unique_ptr<Dataset> open_text(const std::string& path, int64_t seq_len, Split split,
                                   double test_fraction, const std::string& tokenizer) {
  if (seq_len < 1) LOOM_USAGE("text: seq_len must be at least 1 (got ", seq_len, ")");
  if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
    LOOM_USAGE("text: test_fraction must be in [0, 1) (got ", test_fraction, ")");
  }
  if (tokenizer.empty()) return open_bytes(path, seq_len, split, test_fraction);
  return open_tokens(path, tokenizer, seq_len, split, test_fraction);
}

}  // namespace loom::data
