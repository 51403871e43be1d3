// A SentencePiece tokenizer trained on the fortunes corpus (vocab 4096, like the issue asks):
// the whole corpus encodes and decodes back exactly, and its bytes per token are printed.
#include "loom/data/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "loom/data/text_files.h"
#include "temp_dir.h"

namespace loom::data {
namespace {

const char* kFortunes = "/usr/share/games/fortunes";

TEST(Tokenizer, FortunesRoundTripIsExact) {
  if (!std::filesystem::exists(kFortunes)) GTEST_SKIP() << kFortunes << " missing: make deps";
  testing::TempDir dir;
  const std::string model = dir / "tok.model";
  const TrainedTokenizer t = train_tokenizer(kFortunes, 4096, model);
  EXPECT_EQ(t.pieces, 4096);
  const auto tok = open_tokenizer(model);
  EXPECT_EQ(tok->vocab_size(), 4096);

  std::string corpus;
  for (const auto& f : text_files(kFortunes)) append_file(f, corpus);
  EXPECT_EQ(t.bytes, static_cast<int64_t>(corpus.size()));
  // Encoded line by line (as the token cache does), decoded in one piece.
  std::vector<int64_t> ids;
  for_each_chunk(corpus, [&](std::string_view c) {
    for (int64_t id : tok->encode(std::string(c))) ids.push_back(id);
  });
  EXPECT_EQ(static_cast<int64_t>(ids.size()), t.tokens);
  const std::string back = tok->decode(ids);
  EXPECT_EQ(back.size(), corpus.size());
  EXPECT_TRUE(back == corpus) << "the round trip changed the corpus";
  // Any UTF-8 comes back, characters the corpus lacks as byte pieces; bytes that are not UTF-8
  // come back as U+FFFD (SentencePiece reads UTF-8).
  const std::string odd = "caf\xc3\xa9  \t\x01 \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\xa7\xb5 end\n\n";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);
  EXPECT_EQ(tok->decode(tok->encode("a\xff")), "a\xef\xbf\xbd");

  const double bpt = t.bytes_per_token();
  std::printf("fortunes: %lld bytes -> %lld tokens with a 4096-piece BPE: %.3f bytes per token\n",
              static_cast<long long>(t.bytes), static_cast<long long>(t.tokens), bpt);
  EXPECT_GT(bpt, 2.0);  // subwords: several bytes per token on English text
}

}  // namespace
}  // namespace loom::data
