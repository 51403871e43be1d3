#include "loom/model/model.h"

#include "loom/common/error.h"
#include "loom/model/spec.h"

namespace loom::model {

Model build_gpt(const config::ModelConfig& c, const TensorParallel& tp,
                config::Recompute recompute);
Model build_llama(const config::ModelConfig& c, const TensorParallel& tp,
                  config::Recompute recompute);
Model build_mlp(const config::ModelConfig& c);
Model build_cnn(const config::ModelConfig& c);

torch::Tensor Model::loss(const torch::Tensor& logits, const torch::Tensor& target) {
  auto classes = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, classes}), target.reshape({-1}));
}

double Model::flops_per_sample() const {
  double f = 0;
  for (const auto& b : blocks) f += b->flops_per_sample();
  return f;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;  // a tensor-parallel part counts for the whole parameter
  for (const auto& b : blocks)
    for (const auto& p : b->named_parameters())
      n += p.value().numel() * (b->tp_parts() > 1 && tp_split(p.key()) ? b->tp_parts() : 1);
  return n;
}

Model build(const config::ModelConfig& cfg, uint64_t seed, const TensorParallel& tp,
            config::Recompute recompute) {
  LOOM_CHECK(
      (tp.size == 1 && recompute == config::Recompute::None) || config::is_transformer(cfg.kind),
      "tensor parallelism and recomputation are for the transformers (preflight checks it)");
  torch::manual_seed(seed);
  Model m;
  switch (cfg.kind) {
    case config::ModelKind::Gpt: m = build_gpt(cfg, tp, recompute); break;
    case config::ModelKind::Mlp: m = build_mlp(cfg); break;
    case config::ModelKind::Cnn: m = build_cnn(cfg); break;
    case config::ModelKind::Llama: m = build_llama(cfg, tp, recompute); break;
  }
  const ModelSpec spec = spec_of(cfg);
  LOOM_CHECK(static_cast<int>(m.blocks.size()) == spec.blocks, "model/spec.cpp says ", spec.blocks,
             " blocks for ", cfg.kind, ", the builder made ", m.blocks.size());
  m.classifier = spec.classifier;
  return m;
}

TensorSpec input_spec(const config::ModelConfig& cfg, int64_t micro_batch) {
  const ModelSpec spec = spec_of(cfg);
  return {spec.batch_shape(micro_batch), spec.token_input ? torch::kInt64 : torch::kFloat32};
}

std::string param_name(size_t block_index, const std::string& local) {
  return "blocks." + std::to_string(block_index) + "." + local;
}

}  // namespace loom::model
