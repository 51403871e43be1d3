#pragma once
// A text corpus as the ids of a SentencePiece tokenizer, tokenized once and kept in a cache
// file that later runs (and the other ranks) map into memory: no tokenizing and no reading of
// the corpus at start.
//
// Where: next to the tokenizer, in the folder "<tokenizer>.cache/", one file per corpus path
// ("<name>-<hash of the path>.tokens"). The file records what it was made from: the tokenizer's
// content (a hash) and each corpus file's path, size and modification time. When any of these
// differs the file is made again (and replaces the stale one). One process makes it while the
// others wait on a lock file beside it; it appears by an atomic rename, never half-written.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace loom::data {

class TokenCache {
 public:
  // A place where the text can be split: after `byte` bytes of the corpus, `token` tokens.
  struct Boundary {
    uint64_t byte = 0, token = 0;
  };

  // Opens the cache of `corpus` (a file or folder, read like data.kind = text) under the
  // SentencePiece model `tokenizer`, making it first when missing or stale. UsageError when
  // the corpus or tokenizer is bad or the cache folder cannot be written.
  static std::shared_ptr<const TokenCache> open(const std::string& corpus,
                                                const std::string& tokenizer);
  ~TokenCache();
  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;

  std::span<const uint32_t> tokens() const { return {tokens_, n_tokens_}; }
  // Line ends at least kBoundaryBytes apart, from {0, 0} to {bytes(), tokens().size()}.
  std::span<const Boundary> boundaries() const { return {boundaries_, n_boundaries_}; }
  uint64_t bytes() const { return bytes_; }  // of the corpus
  const std::string& path() const { return path_; }
  bool made() const { return made_; }  // whether this open tokenized the corpus
  int64_t files() const { return files_; }

  static constexpr uint64_t kBoundaryBytes = 1024;

 private:
  TokenCache() = default;
  // Maps `path` when it is a cache made from `key`; false (nothing mapped) otherwise.
  bool map(const std::string& path, const std::string& key);

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  const uint32_t* tokens_ = nullptr;
  const Boundary* boundaries_ = nullptr;
  size_t n_tokens_ = 0, n_boundaries_ = 0;
  uint64_t bytes_ = 0;
  int64_t files_ = 0;
  bool made_ = false;
};

}  // namespace loom::data
