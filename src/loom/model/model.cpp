#include "loom/model/model.h"

#include <algorithm>
#include <vector>

#include "loom/common/error.h"
#include "loom/model/spec.h"

namespace loom::model {
namespace {

// Cross entropy, the mean over the rows, that keeps only its float32 input and the rows'
// log-sum-exp, and whose backward makes one [N, C] tensor, (softmax(x) - onehot(target)) / N:
// libtorch's keeps log-softmax's output and its backward holds two [N, C] gradients beside it
// (the loss's, dense over the classes, and log-softmax's input gradient).
struct CrossEntropy : torch::autograd::Function<CrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& target) {
    const torch::Tensor x = logits.to(torch::kFloat32);
    // The rows' log-sum-exp a block of rows at a time: logsumexp makes a shifted copy of its
    // input, which for the whole [N, C] would be the loss's largest transient.
    const int64_t rows = std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(1, x.size(1)));
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& block : x.split(rows)) parts.push_back(block.logsumexp(-1));
    const torch::Tensor lse = torch::cat(parts);
    const torch::Tensor picked = x.gather(1, target.unsqueeze(1)).squeeze(1);
    ctx->save_for_backward({x, target, lse});
    return (lse - picked).mean().to(logits.scalar_type());
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &target = saved[1], &lse = saved[2];
    torch::Tensor g = (x - lse.unsqueeze(1)).exp_();  // softmax, in place of the difference
    g.scatter_add_(1, target.unsqueeze(1), torch::full({x.size(0), 1}, -1.0, g.options()));
    g.mul_(grads[0].to(torch::kFloat32) / double(x.size(0)));
    return {g, torch::Tensor()};  // autograd casts g to the logits' type
  }
};

}  // namespace

Model build_gpt(const config::ModelConfig& c, const TensorParallel& tp,
                config::Recompute recompute);
Model build_llama(const config::ModelConfig& c, const TensorParallel& tp,
                  config::Recompute recompute);
Model build_mlp(const config::ModelConfig& c);
Model build_cnn(const config::ModelConfig& c);

torch::Tensor Model::loss(const torch::Tensor& logits, const torch::Tensor& target) {
  auto classes = logits.size(-1);
  return CrossEntropy::apply(logits.reshape({-1, classes}), target.reshape({-1}));
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
