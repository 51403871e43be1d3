// The token cache (data/token_cache.h) and text datasets with a tokenizer: made once, read
// back memory-mapped, made again when the corpus or the tokenizer changes.
#include "loom/data/token_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "../support/usage_message.h"
#include "loom/common/error.h"
#include "loom/data/dataset.h"
#include "loom/data/tokenizer.h"
#include "temp_dir.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

// Deterministic English-like lines (~60 bytes each), different for each seed.
std::string corpus_text(int lines, uint64_t seed) {
  static const char* words[] = {"the",  "loom",  "weaves",  "a",     "thread", "of",   "cloth",
                                "and",  "every", "warp",    "meets", "weft",   "in",   "time",
                                "with", "care",  "pattern", "blue",  "red",    "gold", "é"};
  std::string text;
  uint64_t s = seed;
  for (int l = 0; l < lines; ++l) {
    std::string line;
    while (line.size() < 55) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      line += words[(s >> 33) % (sizeof words / sizeof *words)];
      line += ' ';
    }
    text += line + (l % 7 == 0 ? "\n\n" : "\n");
  }
  return text;
}

std::vector<uint32_t> as_vector(std::span<const uint32_t> s) {
  return {s.begin(), s.end()};
}

std::string decode(const Tokenizer& tok, std::span<const uint32_t> ids) {
  return tok.decode(std::vector<int64_t>(ids.begin(), ids.end()));
}

class TokenCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "corpus/a.txt", corpus_text(300, 1));
    write_file(dir / "corpus/b.txt", corpus_text(300, 2));
    write_file(dir / "corpus/a.dat", "index files are skipped");
    train_tokenizer(dir / "corpus", 360, tokenizer);
  }
  std::string corpus_bytes() const { return corpus_text(300, 1) + corpus_text(300, 2); }
  TempDir dir;
  const std::string tokenizer = dir / "tok.model";
};

TEST_F(TokenCacheTest, MadeOnceThenReadBack) {
  const auto first = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_TRUE(first->made());
  EXPECT_TRUE(fs::exists(first->path()));
  EXPECT_EQ(fs::path(first->path()).parent_path(), fs::path(tokenizer + ".cache"));
  EXPECT_EQ(first->files(), 2);
  EXPECT_EQ(first->bytes(), corpus_bytes().size());
  // The tokens are the corpus: they decode to it exactly.
  const auto tok = open_tokenizer(tokenizer);
  EXPECT_EQ(decode(*tok, first->tokens()), corpus_bytes());
  EXPECT_LT(first->tokens().size(), corpus_bytes().size() * 3 / 4);  // subwords, not bytes

  const auto second = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_FALSE(second->made());
  EXPECT_EQ(second->path(), first->path());
  EXPECT_EQ(as_vector(second->tokens()), as_vector(first->tokens()));
}

TEST_F(TokenCacheTest, BoundariesAreLineEndsThatSplitTheTokens) {
  const auto cache = TokenCache::open(dir / "corpus", tokenizer);
  const auto tok = open_tokenizer(tokenizer);
  const std::string text = corpus_bytes();
  const auto bounds = cache->boundaries();
  ASSERT_GE(bounds.size(), 3u);
  EXPECT_EQ(bounds.front().byte, 0u);
  EXPECT_EQ(bounds.back().byte, text.size());
  EXPECT_EQ(bounds.back().token, cache->tokens().size());
  for (size_t i = 1; i + 1 < bounds.size(); ++i) {
    EXPECT_EQ(text[bounds[i].byte - 1], '\n');
    EXPECT_GE(bounds[i].byte - bounds[i - 1].byte, TokenCache::kBoundaryBytes);
    // The tokens before the boundary decode to the bytes before it.
    EXPECT_EQ(decode(*tok, cache->tokens().first(bounds[i].token)), text.substr(0, bounds[i].byte));
  }
}

TEST_F(TokenCacheTest, ChangedCorpusIsTokenizedAgain) {
  const auto before = TokenCache::open(dir / "corpus", tokenizer);
  const std::vector<uint32_t> old_tokens = as_vector(before->tokens());
  write_file(dir / "corpus/b.txt", corpus_text(300, 3));  // other text
  const auto after = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_TRUE(after->made());
  EXPECT_EQ(after->path(), before->path());  // replaced, not added
  const auto tok = open_tokenizer(tokenizer);
  EXPECT_EQ(decode(*tok, after->tokens()), corpus_text(300, 1) + corpus_text(300, 3));
  // The first mapping still reads the old tokens (the new file came by rename).
  EXPECT_EQ(as_vector(before->tokens()), old_tokens);
  // A new file in the folder counts too.
  write_file(dir / "corpus/c.txt", "one more line\n");
  EXPECT_TRUE(TokenCache::open(dir / "corpus", tokenizer)->made());
  EXPECT_FALSE(TokenCache::open(dir / "corpus", tokenizer)->made());
}

TEST_F(TokenCacheTest, ChangedTokenizerIsUsed) {
  const auto before = TokenCache::open(dir / "corpus", tokenizer);
  train_tokenizer(dir / "corpus", 300, tokenizer);  // same path, other content
  const auto after = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_TRUE(after->made());
  EXPECT_GT(after->tokens().size(), before->tokens().size());  // fewer pieces, more tokens
  EXPECT_EQ(decode(*open_tokenizer(tokenizer), after->tokens()), corpus_bytes());
}

TEST_F(TokenCacheTest, DamagedCacheIsMadeAgain) {
  const std::string path = TokenCache::open(dir / "corpus", tokenizer)->path();
  fs::resize_file(path, fs::file_size(path) - 8);
  const auto again = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_TRUE(again->made());
  EXPECT_EQ(decode(*open_tokenizer(tokenizer), again->tokens()), corpus_bytes());
}

TEST_F(TokenCacheTest, TextDatasetSplitsTheTokensAtALineEnd) {
  const int64_t seq_len = 16;
  auto train = open_text(dir / "corpus", seq_len, Split::Train, 0.1, tokenizer);
  auto test = open_text(dir / "corpus", seq_len, Split::Test, 0.1, tokenizer);
  const auto cache = TokenCache::open(dir / "corpus", tokenizer);
  EXPECT_FALSE(cache->made());  // the datasets made it
  const auto tokens = cache->tokens();
  // The split: the boundary nearest to 90 % of the bytes.
  const auto total = static_cast<int64_t>(cache->bytes());
  const int64_t want = total - static_cast<int64_t>(double(total) * 0.1);
  TokenCache::Boundary cut;
  for (const auto& b : cache->boundaries())
    if (std::abs(int64_t(b.byte) - want) < std::abs(int64_t(cut.byte) - want)) cut = b;
  EXPECT_NEAR(double(cut.byte) / double(total), 0.9, 0.02);
  EXPECT_EQ(train->size(), (int64_t(cut.token) - 1) / seq_len);
  EXPECT_EQ(test->size(), (int64_t(tokens.size() - cut.token) - 1) / seq_len);
  // Sample i of a split is the window at token i * seq_len of its range.
  const std::vector<int64_t> idx = {0, 2};
  const Batch a = train->get(idx);
  const Batch b = test->get(idx);
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t t = 0; t < seq_len; ++t) {
      const size_t at = idx[k] * seq_len + t;
      EXPECT_EQ(a.input.i64[k * seq_len + t], tokens[at]);
      EXPECT_EQ(a.target.i64[k * seq_len + t], tokens[at + 1]);
      EXPECT_EQ(b.input.i64[k * seq_len + t], tokens[cut.token + at]);
      EXPECT_EQ(b.target.i64[k * seq_len + t], tokens[cut.token + at + 1]);
    }
  // Bytes per token: each split's own bytes over its own tokens.
  EXPECT_DOUBLE_EQ(train->bytes_per_token(), double(cut.byte) / double(cut.token));
  EXPECT_DOUBLE_EQ(test->bytes_per_token(),
                   double(total - int64_t(cut.byte)) / double(tokens.size() - cut.token));
  EXPECT_GT(test->bytes_per_token(), 1.3);
  EXPECT_NE(test->describe().find("tokens"), std::string::npos) << test->describe();
}

TEST_F(TokenCacheTest, BytesStayTheDefault) {
  auto bytes = open_text(dir / "corpus", 16, Split::Test, 0.1);
  EXPECT_EQ(bytes->bytes_per_token(), 1.0);
  EXPECT_FALSE(fs::exists(tokenizer + ".cache"));
}

using loom::test::usage_message;

TEST_F(TokenCacheTest, BadTokenizerNamesTheFix) {
  const std::string missing =
      usage_message([&] { open_text(dir / "corpus", 16, Split::Train, 0.1, dir / "nope.model"); });
  EXPECT_NE(missing.find("loom tokenizer train"), std::string::npos) << missing;
  write_file(dir / "junk.model", "not a model");
  const std::string junk =
      usage_message([&] { open_text(dir / "corpus", 16, Split::Train, 0.1, dir / "junk.model"); });
  EXPECT_NE(junk.find("not a SentencePiece model"), std::string::npos) << junk;
  EXPECT_FALSE(fs::exists(dir / "junk.model.cache"));
}

TEST_F(TokenCacheTest, TrainingRefusesAVocabularyTooLarge) {
  write_file(dir / "tiny.txt", "a few words only\n");
  const std::string msg =
      usage_message([&] { train_tokenizer(dir / "tiny.txt", 5000, dir / "tiny.model"); });
  EXPECT_NE(msg.find("--vocab"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir / "tiny.model"));
}

}  // namespace
}  // namespace loom::data
