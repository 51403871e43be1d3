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
  // Ids outside [0, vocab_size()) (a model's padded vocabulary) decode to nothing.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual std::string describe() const = 0;  // "bytes", "sentencepiece tok.model (4096 pieces)"
};

// path "": bytes. Otherwise the SentencePiece model at `path` (throws UsageError naming the
// file and the fix when it is missing or not a model).
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path);
// The same, for a model of `model_vocab` tokens (generate, export): UsageError when the
// tokenizer has more tokens than the model (another run's tokenizer).
std::unique_ptr<Tokenizer> open_tokenizer_for(const std::string& path, int64_t model_vocab);

// What `loom tokenizer train` made and measured.
struct TrainedTokenizer {
  int64_t pieces = 0;  // vocabulary size, special and byte pieces included
  int64_t files = 0, bytes = 0;
  int64_t tokens = 0;  // the corpus encoded with the new model
  double bytes_per_token() const { return tokens > 0 ? double(bytes) / double(tokens) : 0; }
};

// Trains a SentencePiece BPE model of `vocab` pieces on the text at `data` (a file or a folder,
// read like data.kind = text) and writes it to `out` (atomically). The model encodes every
// byte sequence and decodes it back exactly: no normalization, whitespace kept as is, and
// bytes it has no piece for as byte pieces (byte fallback). UsageError for bad input (too small
// or too large a vocabulary for the corpus, an unwritable `out`).
TrainedTokenizer train_tokenizer(const std::string& data, int64_t vocab, const std::string& out);

}  // namespace loom::data
