#include "loom/model/transformer_parts.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <cmath>
#include <utility>

#include "loom/common/error.h"
#include "loom/model/compute.h"
#include "loom/model/split_products.h"

namespace loom::model {

namespace F = torch::nn::functional;

void TpBlock::keep_my_part() {
  if (tp_.size == 1) return;
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters())
    if (tp_split(p.key()))
      p.value().set_data(tp_shard(p.key(), p.value(), tp_.rank, tp_.size).clone());
}

TokenEmbedding::TokenEmbedding(int64_t vocab, int64_t seq_len, int64_t width,
                               bool learned_positions, const TensorParallel& tp, double init_std)
    : TpBlock(tp), seq_len_(seq_len), width_(width), part_(vocab / tp.size) {
  tok_ = register_module("tok", torch::nn::Embedding(vocab, width));
  if (init_std > 0) {
    torch::NoGradGuard no_grad;
    tok_->weight.normal_(0.0, init_std);
  }
  if (learned_positions) pos_ = register_module("pos", torch::nn::Embedding(seq_len, width));
  keep_my_part();
}

torch::Tensor TokenEmbedding::forward(const torch::Tensor& idx) {
  auto t = idx.size(1);
  LOOM_CHECK_LE(t, seq_len_, "sequence longer than model.seq_len");
  const auto positions = torch::dtype(torch::kLong).device(idx.device());
  // Learned positions of the whole sequence, or (sequence parallelism) of this rank's part.
  auto with_positions = [&](const torch::Tensor& e, int64_t from, int64_t to) {
    if (!pos_) return e;
    if (tp_.sequence)
      return e + F::embedding(torch::arange(from, to, positions), replicated(pos_->weight, tp_));
    return e + pos_(torch::arange(from, to, positions));
  };
  if (tp_.size == 1) return with_positions(tok_(idx), 0, t);
  // This rank's rows of the vocabulary; the other tokens get zeros, the sum over the group
  // the embedding.
  const torch::Tensor local = idx - part_ * tp_.rank;
  const torch::Tensor other = (local < 0).logical_or(local >= part_);
  const torch::Tensor e = tok_(local.masked_fill(other, 0)).masked_fill(other.unsqueeze(-1), 0);
  if (!tp_.sequence) return with_positions(reduce_from_tp(e, tp_), 0, t);
  // Sequence parallelism: this rank's positions of the summed embedding.
  const int64_t n = t / tp_.size;
  return with_positions(leave_split(e, tp_), tp_.rank * n, (tp_.rank + 1) * n);
}

LmHead::LmHead(const config::ModelConfig& c, const TensorParallel& tp, torch::Tensor tied,
               bool bias, const std::string& norm_name, std::shared_ptr<torch::nn::Module> norm,
               std::function<torch::Tensor(const torch::Tensor&)> apply_norm)
    : TpBlock(tp),
      vocab_(c.vocab),
      seq_len_(c.seq_len),
      width_(c.width),
      tied_(std::move(tied)),
      apply_norm_(std::move(apply_norm)) {
  register_module(norm_name, std::move(norm));
  if (!tied_.defined())
    head_ = register_module(
        "head", torch::nn::Linear(torch::nn::LinearOptions(c.width, c.vocab).bias(bias)));
  keep_my_part();
}

void LmHead::set_tied_matrix(const torch::Tensor& m) {
  LOOM_CHECK(tied_.defined() && m.sizes() == tied_.sizes(),
             "a tied head takes a matrix of its tied weight's shape");
  tied_ = m;
}

torch::Tensor LmHead::forward(const torch::Tensor& x) {
  const torch::Tensor n = apply_norm_(x);
  // A tied head is not a recorded product: the embedding's gradient comes in I as a whole.
  if (tied_.defined()) return split_products(n, {{tied_, {}}}, tp_, /*record=*/false)[0];
  return split_products(n, {weights_of(head_)}, tp_)[0];
}

torch::Tensor TokenEmbedding::at(const torch::Tensor& idx, int64_t first) {
  LOOM_CHECK(tp_.size == 1, "generation runs the whole model (tp = 1)");
  LOOM_CHECK_LE(first + idx.size(1), seq_len_, "positions beyond model.seq_len");
  torch::Tensor e = tok_(idx);
  if (!pos_) return e;
  return e + pos_(torch::arange(first, first + idx.size(1),
                                torch::dtype(torch::kLong).device(idx.device())));
}

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, KvCache& cache) {
  cache.k = cache.k.defined() ? torch::cat({cache.k, k}, 2) : k;
  cache.v = cache.v.defined() ? torch::cat({cache.v, v}, 2) : v;
  const int64_t b = q.size(0), heads = q.size(1), n = q.size(2), hd = q.size(3);
  const int64_t total = cache.positions(), group = heads / cache.k.size(1);
  const torch::Tensor keys = group > 1 ? cache.k.repeat_interleave(group, 1) : cache.k;
  const torch::Tensor values = group > 1 ? cache.v.repeat_interleave(group, 1) : cache.v;
  // Query i sits at position total - n + i and sees the keys up to it.
  const torch::Tensor hidden =
      torch::ones({n, total}, torch::dtype(torch::kBool).device(q.device())).triu(total - n + 1);
  const torch::Tensor scores = (torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(double(hd)))
                                   .masked_fill(hidden, -INFINITY);
  return torch::matmul(scores.softmax(-1, torch::kFloat32).to(q.scalar_type()), values)
      .transpose(1, 2)
      .reshape({b, n, heads * hd});
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Recomputed : torch::autograd::Function<Recomputed> {
  // params: the part's parameters (a TensorList, so that each is an input of the node).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t layer,
                               int64_t part, at::TensorList params);
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

// Autograd contexts keep only IValues: the layer travels as its address (the model outlives
// every graph).
RecomputableLayer* layer_at(int64_t address) {
  return reinterpret_cast<RecomputableLayer*>(address);  // NOLINT(performance-no-int-to-ptr)
}

torch::Tensor Recomputed::forward(AutogradContext* ctx, const torch::Tensor& x, int64_t layer,
                                  int64_t part, at::TensorList) {
  ctx->saved_data["layer"] = layer;
  ctx->saved_data["part"] = part;
  ctx->saved_data["bf16"] = autocast_on(x.device());  // the recomputation runs as this did
  ctx->save_for_backward({x});
  return layer_at(layer)->run(static_cast<Part>(part), x);
}

// Where the gradient of `input` (x or a parameter) comes out of the engine, as
// torch::autograd::grad finds it.
torch::autograd::Edge gradient_out(const torch::Tensor& input) {
  if (input.grad_fn()) return {input.grad_fn(), static_cast<uint32_t>(input.output_nr())};
  std::shared_ptr<torch::autograd::Node> node =
      torch::autograd::impl::try_get_grad_accumulator(input);
  // An input the part did not use: a node the engine never reaches (its gradient undefined).
  if (!node) node = std::make_shared<torch::autograd::Identity>();
  return {std::move(node), 0};
}

variable_list Recomputed::backward(AutogradContext* ctx, variable_list grad) {
  auto* layer = layer_at(ctx->saved_data["layer"].toInt());
  const auto part = static_cast<Part>(ctx->saved_data["part"].toInt());
  const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
  torch::autograd::Edge root;
  {
    torch::AutoGradMode on(true);
    AutocastScope autocast(x.device(), ctx->saved_data["bf16"].toBool());
    const torch::Tensor y = layer->run(part, x);
    root = torch::autograd::impl::gradient_edge(y);
  }
  LOOM_CHECK(root.function, "a recomputed part's output has no gradient");
  // After the run: x's accumulator exists only once the graph uses x.
  torch::autograd::edge_list inputs = {gradient_out(x)};
  for (const auto& p : layer->parameters_of(part)) inputs.push_back(gradient_out(p));
  // The engine from the output's node, not torch::autograd::grad on the output: that would
  // hold the recomputed output [M, h] (nothing else keeps it) through the whole backward.
  variable_list g = torch::autograd::Engine::get_default_engine().execute(
      {root}, {grad[0]}, /*keep_graph=*/false, /*create_graph=*/false,
      /*accumulate_grad=*/false, inputs);
  variable_list out = {g[0], torch::Tensor(), torch::Tensor()};  // x, layer, part
  out.insert(out.end(), g.begin() + 1, g.end());                 // the parameters
  return out;
}

}  // namespace

torch::Tensor RecomputableLayer::forward(const torch::Tensor& x) {
  if (recompute_ == config::Recompute::Full && torch::GradMode::is_enabled()) {
    const std::vector<torch::Tensor> params = parameters();
    return Recomputed::apply(x, reinterpret_cast<int64_t>(this), static_cast<int64_t>(Part::Layer),
                             at::TensorList(params));
  }
  return run(Part::Layer, x);
}

torch::Tensor RecomputableLayer::core(const torch::Tensor& x) {
  if (recompute_ == config::Recompute::Selective && torch::GradMode::is_enabled())
    return Recomputed::apply(x, reinterpret_cast<int64_t>(this),
                             static_cast<int64_t>(Part::AttentionCore), at::TensorList());
  return run(Part::AttentionCore, x);
}

torch::Tensor causal_mask(int64_t seq_len) {
  return torch::zeros({seq_len, seq_len})
      .masked_fill(torch::triu(torch::ones({seq_len, seq_len}, torch::kBool), 1), -INFINITY);
}

}  // namespace loom::model
