#include "loom/data/tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "loom/common/error.h"

namespace loom::data {
namespace {

class Bytes : public Tokenizer {
 public:
  int64_t vocab_size() const override { return 256; }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int64_t id : ids)
      if (id >= 0 && id < 256) text.push_back(static_cast<char>(id));
    return text;
  }
  std::string describe() const override { return "bytes"; }
};

class SentencePiece : public Tokenizer {
 public:
  explicit SentencePiece(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      LOOM_USAGE("data.tokenizer '", path,
                 "' not found; make one with loom tokenizer train --data CORPUS --vocab 4096 "
                 "--out ",
                 path, " (or drop --tokenizer for bytes)");
    if (!sp_.Load(path).ok())
      LOOM_USAGE("data.tokenizer '", path,
                 "' is not a SentencePiece model; make one with loom tokenizer train");
  }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    LOOM_CHECK(status.ok(), "sentencepiece encode: ", status.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int> in;
    in.reserve(ids.size());
    for (int64_t id : ids)
      if (id >= 0 && id < vocab_size()) in.push_back(static_cast<int>(id));
    std::string text;
    const auto status = sp_.Decode(in, &text);
    LOOM_CHECK(status.ok(), "sentencepiece decode: ", status.ToString());
    return text;
  }
  std::string describe() const override {
    return "sentencepiece " + path_ + " (" + std::to_string(vocab_size()) + " pieces)";
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path.empty()) return std::make_unique<Bytes>();
  return std::make_unique<SentencePiece>(path);
}

std::unique_ptr<Tokenizer> open_tokenizer_for(const std::string& path, int64_t model_vocab) {
  std::unique_ptr<Tokenizer> t = open_tokenizer(path);
  if (t->vocab_size() > model_vocab)
    LOOM_USAGE("the tokenizer (", t->describe(), ") has ", t->vocab_size(), " tokens, the model ",
               model_vocab, "; pass the run's --tokenizer");
  return t;
}

}  // namespace loom::data
