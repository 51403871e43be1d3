#include "loom/data/tokenizer.h"

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
    for (int64_t id : ids) text.push_back(static_cast<char>(id & 0xff));
    return text;
  }
  std::string describe() const override { return "bytes"; }
};

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path.empty()) return std::make_unique<Bytes>();
  LOOM_USAGE("data.tokenizer '", path,
             "': SentencePiece tokenizers are not built into this loom yet; drop --tokenizer "
             "(bytes)");
}

}  // namespace loom::data
