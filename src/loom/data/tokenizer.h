#pragma once
// Text to token ids and back: bytes (the default: 256 tokens, one per byte) or a SentencePiece
// model (data.tokenizer; `loom tokenizer train` makes one). No libtorch here.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual std::string describe() const = 0;  // "bytes", "sentencepiece tok.model (4096 pieces)"
};

// path "": bytes. Otherwise the SentencePiece model at `path` (throws UsageError naming the
// file and the fix when it is missing or not a model).
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path);

}  // namespace loom::data
