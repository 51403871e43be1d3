#include "loom/model/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include "loom/common/error.h"
#include "loom/model/transformer_parts.h"

namespace loom::model {
int64_t choose_token(const torch::Tensor& position_logits, const SampleOptions& o,
                     at::Generator& gen) {
  torch::Tensor logits = position_logits.to(torch::kCPU, torch::kFloat32);
  if (o.temperature <= 0) return logits.argmax().item<int64_t>();
  logits = logits / o.temperature;
  if (o.top_k > 0 && o.top_k < logits.numel()) {
    const torch::Tensor kth = std::get<0>(logits.topk(o.top_k)).min();
    logits = logits.masked_fill(logits < kth, -INFINITY);
  }
  return at::multinomial(logits.softmax(-1), 1, false, gen).item<int64_t>();
}

torch::Tensor logits_of(const Model& m, const std::vector<int64_t>& tokens) {
  torch::NoGradGuard no_grad;
  const torch::Device device = m.blocks.front()->parameters().front().device();
  torch::Tensor x = torch::tensor(tokens, torch::kInt64).view({1, -1}).to(device);
  for (const auto& b : m.blocks) x = b->forward(x);
  return x.squeeze(0).to(torch::kCPU, torch::kFloat32);
}

std::vector<int64_t> generate(const Model& m, int64_t seq_len, const std::vector<int64_t>& prompt,
                              const SampleOptions& o) {
  LOOM_CHECK(m.blocks.size() >= 2, "a transformer has an embedding and a head");
  auto* embedding = dynamic_cast<TokenEmbedding*>(m.blocks.front().get());
  std::vector<RecomputableLayer*> layers;
  for (size_t i = 1; i + 1 < m.blocks.size(); ++i)
    layers.push_back(dynamic_cast<RecomputableLayer*>(m.blocks[i].get()));
  if (!embedding || layers.empty() || layers.front() == nullptr)
    LOOM_USAGE("generation needs a transformer (model.kind gpt or llama), not ", m.name);
  if (prompt.empty()) LOOM_USAGE("the prompt is empty; give --prompt some text");
  if (int64_t(prompt.size()) >= seq_len)
    LOOM_USAGE("the prompt is ", prompt.size(), " tokens, the model's context ", seq_len,
               "; shorten --prompt");
  torch::NoGradGuard no_grad;
  const torch::Device device = embedding->token_weight().device();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  std::vector<int64_t> tokens = prompt, out;
  std::vector<KvCache> caches(layers.size());
  auto tensor = [&](const std::vector<int64_t>& ids) {
    return torch::tensor(ids, torch::kInt64).view({1, -1}).to(device);
  };
  while (int64_t(out.size()) < o.max_tokens) {
    torch::Tensor x;
    const bool full = int64_t(tokens.size()) >= seq_len;
    if (o.kv_cache && !full) {  // the prompt at first, then the last token
      const int64_t first = caches.front().positions();
      x = embedding->at(tensor({tokens.begin() + first, tokens.end()}), first);
      for (size_t l = 0; l < layers.size(); ++l) x = layers[l]->decode(x, caches[l]);
    } else {  // the whole text again; once it fills the context, its last seq_len tokens
      const auto from = tokens.end() - std::min<int64_t>(int64_t(tokens.size()), seq_len);
      x = embedding->at(tensor({from, tokens.end()}), 0);
      for (auto* layer : layers) x = layer->run(Part::Layer, x);
    }
    const torch::Tensor logits = m.blocks.back()->forward(x.slice(1, x.size(1) - 1));
    const int64_t next = choose_token(logits.view({-1}), o, gen);
    tokens.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace loom::model
