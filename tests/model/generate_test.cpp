// Generation (model/generate.h): with the KV cache it decodes what it decodes without one (the
// whole sequence again per token), for the GPT and the Llama with grouped-query attention;
// top-k 1 is greedy; a seed makes sampling repeatable.
#include "loom/model/generate.h"

#include <gtest/gtest.h>

#include "loom/config/config.h"

namespace {

using loom::config::ModelKind;

loom::config::ModelConfig small(ModelKind kind) {
  loom::config::ModelConfig c;
  c.kind = kind;
  c.seq_len = 48;
  c.width = 32;
  c.layers = 2;
  c.heads = 4;
  if (kind == ModelKind::Llama) c.kv_heads = 2;
  return c;
}

class Generate : public ::testing::TestWithParam<ModelKind> {};

TEST_P(Generate, KvCacheDecodesWhatTheWholeSequenceDecodes) {
  const auto c = small(GetParam());
  const auto m = loom::model::build(c, 11);
  loom::model::SampleOptions o;
  o.temperature = 0;
  o.max_tokens = 30;
  const std::vector<int64_t> prompt = {72, 101, 108, 108, 111, 32};
  const auto cached = loom::model::generate(m, c.seq_len, prompt, o);
  o.kv_cache = false;
  const auto whole = loom::model::generate(m, c.seq_len, prompt, o);
  EXPECT_EQ(cached.size(), 30u);
  EXPECT_EQ(cached, whole);
  // Beyond the context (48 positions) a window of the last 48 tokens goes on, with or without
  // the cache alike.
  o.max_tokens = 60;
  const auto windowed = loom::model::generate(m, c.seq_len, prompt, o);
  EXPECT_EQ(windowed.size(), 60u);
  o.kv_cache = true;
  EXPECT_EQ(loom::model::generate(m, c.seq_len, prompt, o), windowed);
}

TEST_P(Generate, SamplingFollowsTheSeedAndTopOneIsGreedy) {
  const auto c = small(GetParam());
  const auto m = loom::model::build(c, 11);
  const std::vector<int64_t> prompt = {1, 2, 3};
  loom::model::SampleOptions o;
  o.max_tokens = 20;
  o.seed = 5;
  const auto a = loom::model::generate(m, c.seq_len, prompt, o);
  EXPECT_EQ(a, loom::model::generate(m, c.seq_len, prompt, o));
  o.seed = 6;
  EXPECT_NE(a, loom::model::generate(m, c.seq_len, prompt, o));
  o.top_k = 1;
  const auto top1 = loom::model::generate(m, c.seq_len, prompt, o);
  o.top_k = 0;
  o.temperature = 0;
  EXPECT_EQ(top1, loom::model::generate(m, c.seq_len, prompt, o));
}

INSTANTIATE_TEST_SUITE_P(Models, Generate, ::testing::Values(ModelKind::Gpt, ModelKind::Llama),
                         [](const auto& info) { return loom::config::name_of(info.param); });

}  // namespace
