#pragma once
// Text generation from a whole transformer model (gpt, llama; tp = 1) in one process: the
// prompt once, then one token at a time with a KV cache (each layer keeps the keys and values of
// the positions so far), or, for comparison, the whole sequence again at every token. Once the
// text fills the model's context, each token is computed from the last seq_len tokens (a
// sliding window, without the cache).
#include <ATen/core/Generator.h>

#include <cstdint>
#include <vector>

#include "loom/model/model.h"

namespace loom::model {

struct SampleOptions {
  int64_t max_tokens = 64;   // new tokens
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int64_t top_k = 0;         // sample among the k most likely; 0: all
  uint64_t seed = 0;
  bool kv_cache = true;
};

// The next token from one position's logits [vocab] under o's temperature and top-k.
int64_t choose_token(const torch::Tensor& logits, const SampleOptions& o, at::Generator& gen);

// The logits [tokens, vocab] of every position of `tokens` (one forward, no cache).
torch::Tensor logits_of(const Model& m, const std::vector<int64_t>& tokens);

// The prompt's continuation (new tokens only). `seq_len`: the model's context length.
std::vector<int64_t> generate(const Model& m, int64_t seq_len, const std::vector<int64_t>& prompt,
                              const SampleOptions& o);

}  // namespace loom::model
