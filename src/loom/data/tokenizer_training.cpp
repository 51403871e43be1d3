// train_tokenizer (tokenizer.h): SentencePiece's trainer fed the corpus line by line.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <thread>
#include <unordered_map>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/data/text_files.h"
#include "loom/data/tokenizer.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;

// The corpus's chunks (text_files.h), one file in memory at a time.
class ChunkIterator : public sentencepiece::SentenceIterator {
 public:
  ChunkIterator(std::vector<fs::path> files, std::string_view fix)
      : files_(std::move(files)), fix_(fix) {
    load();
  }
  bool done() const override { return chunk_ >= chunks_.size() && file_ >= files_.size(); }
  void Next() override {
    if (++chunk_ >= chunks_.size()) load();
  }
  const std::string& value() const override { return value_ = std::string(chunks_[chunk_]); }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // The next file with at least one chunk.
  void load() {
    chunks_.clear();
    chunk_ = 0;
    while (chunks_.empty() && file_ < files_.size()) {
      text_.clear();
      append_file(files_[file_++], text_, fix_);
      for_each_chunk(text_, [&](std::string_view c) { chunks_.push_back(c); });
    }
  }

  std::vector<fs::path> files_;
  std::string_view fix_;
  size_t file_ = 0;
  std::string text_;
  std::vector<std::string_view> chunks_;
  size_t chunk_ = 0;
  mutable std::string value_;
};

// Settings that make decode(encode(text)) == text for any bytes: no normalization, spaces kept
// as they are (no dummy prefix, no collapsing), unknown bytes as byte pieces.
std::unordered_map<std::string, std::string> settings(int64_t vocab) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  return {{"model_type", "bpe"},
          {"vocab_size", std::to_string(vocab)},
          {"normalization_rule_name", "identity"},
          {"add_dummy_prefix", "false"},
          {"remove_extra_whitespaces", "false"},
          {"allow_whitespace_only_pieces", "true"},
          {"split_digits", "true"},
          {"byte_fallback", "true"},
          {"character_coverage", "1.0"},
          {"max_sentence_length", std::to_string(kMaxChunkBytes)},
          {"num_threads", std::to_string(threads)},
          {"minloglevel", "2"}};  // no progress lines, no warnings
}

// SentencePiece's message without the source position and check it starts with.
std::string reason(const sentencepiece::util::Status& status) {
  const std::string m = status.message();
  const size_t end_of_check = m.rfind("] ");
  return end_of_check == std::string::npos ? m : m.substr(end_of_check + 2);
}

}  // namespace

TrainedTokenizer train_tokenizer(const std::string& data, int64_t vocab, const std::string& out) {
  constexpr std::string_view fix = "give --data a text file or a folder of text files";
  const std::vector<fs::path> files = text_files(data, fix);
  ChunkIterator chunks(files, fix);
  if (chunks.done()) LOOM_USAGE("loom tokenizer train: ", data, " holds no text; ", fix);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(settings(vocab), &chunks, &model);
  if (!status.ok())
    LOOM_USAGE("loom tokenizer train: SentencePiece refused --vocab ", vocab, " for ", data, " (",
               reason(status), "); choose another --vocab or more text");
  AtomicFile file(out, "choose another --out, in a writable folder with room");
  file.write(model);
  file.commit();

  TrainedTokenizer r;
  r.files = static_cast<int64_t>(files.size());
  const std::unique_ptr<Tokenizer> tok = open_tokenizer(out);
  r.pieces = tok->vocab_size();
  for (const fs::path& f : files) {
    std::string text;
    append_file(f, text, fix);
    r.bytes += static_cast<int64_t>(text.size());
    for_each_chunk(text, [&](std::string_view c) {
      r.tokens += static_cast<int64_t>(tok->encode(std::string(c)).size());
    });
  }
  return r;
}

}  // namespace loom::data
