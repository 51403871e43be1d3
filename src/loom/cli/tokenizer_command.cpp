// loom tokenizer train: a SentencePiece tokenizer for data.tokenizer (data/tokenizer.h).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/data/tokenizer.h"
#include "loom/flags/flags.h"

namespace loom::cli {
namespace {

const char* kUsage = R"(usage: loom tokenizer train --data FILE_OR_DIR --vocab N --out FILE

Trains a SentencePiece BPE tokenizer of N pieces on a text corpus (a file, or every file under
a folder, read like data.kind = text) and writes the model to FILE (replacing it). The model
encodes any bytes and decodes them back exactly: no normalization, whitespace as it is, and
bytes without a piece of their own as byte pieces (so N >= 300 or so: 256 byte pieces and
3 special ones come first). Prints the corpus's bytes per token under the new model.

Train with it: data.tokenizer = "FILE" (--tokenizer FILE) and model.vocab >= N. The corpus is
tokenized once, at the first run, into FILE.cache/ (docs/guide/cli.md).

  --data FILE_OR_DIR  the corpus
  --vocab N           pieces in the vocabulary (4096)
  --out FILE          where to write the model (tok.model)

  loom tokenizer train --data /usr/share/games/fortunes --vocab 4096 --out tok.model
)";

}  // namespace

int tokenizer_command(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + std::min<size_t>(args.size(), 1), args.end());
  const flags::Parsed a = flags::parse(
      rest, {"tokenizer " + sub,
             {{"data", "/usr/share/games/fortunes"}, {"vocab", "4096"}, {"out", "tok.model"}}});
  if (a.help || sub == "--help" || sub == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (sub != "train")
    LOOM_USAGE("loom tokenizer needs train, got '", sub, "'; see loom tokenizer --help");
  if (!a.has("data") || !a.has("vocab") || !a.has("out"))
    LOOM_USAGE(
        "loom tokenizer train needs --data FILE_OR_DIR --vocab N --out FILE; see loom "
        "tokenizer --help");
  const int64_t vocab = flags::to_int64("vocab", a.get("vocab"), 260, 1 << 24);
  const auto t0 = std::chrono::steady_clock::now();
  const data::TrainedTokenizer t = data::train_tokenizer(a.get("data"), vocab, a.get("out"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: %lld pieces, trained on %s (%lld files, %lld bytes) in %.1f s\n",
              a.get("out").c_str(), static_cast<long long>(t.pieces), a.get("data").c_str(),
              static_cast<long long>(t.files), static_cast<long long>(t.bytes), s);
  std::printf("the corpus is %lld tokens: %.3f bytes per token\n", static_cast<long long>(t.tokens),
              t.bytes_per_token());
  return 0;
}

}  // namespace loom::cli
