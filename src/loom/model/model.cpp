#include "loom/model/model.h"

#include "loom/common/error.h"

namespace loom::model {

Model build_gpt(const config::ModelConfig& c);
Model build_mlp(const config::ModelConfig& c);
Model build_cnn(const config::ModelConfig& c);

torch::Tensor Model::loss(const torch::Tensor& logits, const torch::Tensor& target) {
  auto classes = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, classes}),
                                              target.reshape({-1}));
}

double Model::flops_per_sample() const {
  double f = 0;
  for (const auto& b : blocks) f += b->flops_per_sample();
  return f;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& b : blocks)
    for (const auto& p : b->parameters()) n += p.numel();
  return n;
}

Model build(const config::ModelConfig& cfg, uint64_t seed) {
  torch::manual_seed(seed);
  if (cfg.kind == "gpt") return build_gpt(cfg);
  if (cfg.kind == "mlp") return build_mlp(cfg);
  if (cfg.kind == "cnn") return build_cnn(cfg);
  LOOM_USAGE("model.kind must be one of gpt|mlp|cnn, got '", cfg.kind, "'");
}

TensorSpec input_spec(const config::ModelConfig& cfg, int64_t micro_batch) {
  if (cfg.kind == "gpt") return {{micro_batch, cfg.seq_len}, torch::kInt64};
  return {{micro_batch, 1, 28, 28}, torch::kFloat32};
}

std::string param_name(size_t block_index, const std::string& local) {
  return "blocks." + std::to_string(block_index) + "." + local;
}

}  // namespace loom::model
