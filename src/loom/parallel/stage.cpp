#include "loom/parallel/stage.h"

#include <optional>

#include "loom/common/error.h"
#include "loom/parallel/memory_tracker.h"

namespace loom::parallel {

Stage::Stage(int index, int num_stages, std::vector<std::shared_ptr<model::Block>> blocks,
             int first_block, model::LossFn loss, model::Compute compute)
    : index_(index),
      num_stages_(num_stages),
      blocks_(std::move(blocks)),
      loss_(std::move(loss)),
      compute_(compute) {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const int parts = blocks_[b]->tp_parts();
    for (const auto& item : blocks_[b]->named_parameters()) {
      const bool split = parts > 1 && model::tp_split(item.key());
      params_.push_back({model::param_name(first_block + b, item.key()), item.value(),
                         split ? blocks_[b]->tp_rank() : -1, parts});
      grad_tensors_.push_back(item.value());
    }
  }
}

int64_t Stage::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.tensor.numel();
  return n;
}

torch::Tensor Stage::run_blocks(const torch::Tensor& input) {
  model::AutocastScope autocast(compute_);
  torch::Tensor x = input;
  for (auto& b : blocks_) x = b->forward(x);
  return x;
}

namespace {

// A running sum on the device (no host synchronisation per micro-batch).
void accumulate(torch::Tensor& sum, const torch::Tensor& v) {
  sum = sum.defined() ? sum + v : v.clone();
}

}  // namespace

double Stage::loss_sum() const {
  return loss_sum_.defined() ? loss_sum_.item<double>() : 0.0;
}

int64_t Stage::correct() const {
  return correct_.defined() ? correct_.item<int64_t>() : 0;
}

torch::Tensor Stage::forward(int mb, const torch::Tensor& input, const torch::Tensor& target,
                             double loss_scale) {
  LOOM_CHECK(live_.count(mb) == 0, "stage ", index_, " forward of micro-batch ", mb, " twice");
  Live live;
  const int64_t before = MemoryTracker::live_bytes();
  live.input = is_first() ? input : input.detach().requires_grad_(true);
  torch::Tensor out;
  {
    std::optional<model::RecordLinearUses> record;
    if (split_backward_) record.emplace(&live.split.uses);
    out = run_blocks(live.input);
  }
  torch::Tensor result;  // not `out` yet: the last stage's 16-bit logits go once widened
  if (is_last()) {
    LOOM_CHECK(target.defined(), "last stage needs targets");
    out = out.to(torch::kFloat32);  // bf16 logits: the loss in fp32
    torch::Tensor loss = loss_(out, target);
    accumulate(loss_sum_, loss.detach().to(torch::kFloat64));
    if (out.dim() == 2) {  // classifier logits [b, classes]
      accumulate(correct_, out.argmax(1).eq(target).sum());
      counted_ += target.numel();
    }
    live.output = loss * loss_scale;
    result = loss.detach();
    out = torch::Tensor();  // the logits: the loss keeps what it needs (measured below)
  } else {
    live.output = result = out;
  }
  // What this micro-batch keeps alive until its backward: the autograd graph's saved tensors
  // and the output, measured by the allocator (a rough estimate without the tracker).
  live.bytes = MemoryTracker::installed() ? MemoryTracker::live_bytes() - before
               : out.defined()            ? out.numel() * out.element_size() * 8
                                          : 0;
  live_.emplace(mb, std::move(live));
  return result;
}

torch::Tensor Stage::forward_eval(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  torch::Tensor out = run_blocks(input);
  return is_last() ? out.to(torch::kFloat32) : out;
}

ActivationSpec Stage::output_spec(const ActivationSpec& in) {
  torch::NoGradGuard no_grad;
  torch::Tensor out = run_blocks(torch::zeros(in.shape, options(in.dtype)));
  return {out.sizes().vec(), out.scalar_type()};
}

Stage::Live Stage::take(int mb) {
  auto it = live_.find(mb);
  LOOM_CHECK(it != live_.end(), "stage ", index_, " backward of micro-batch ", mb,
             " without its forward");
  Live l = std::move(it->second);
  live_.erase(it);
  return l;
}

torch::Tensor Stage::backward(int mb, const torch::Tensor& grad_output) {
  Live l = take(mb);
  if (is_last())
    l.output.backward();
  else
    l.output.backward(grad_output);
  return is_first() ? torch::Tensor() : l.input.grad();
}

torch::Tensor Stage::backward_input(int mb, const torch::Tensor& grad_output) {
  auto it = live_.find(mb);
  LOOM_CHECK(it != live_.end(), "stage ", index_, " I of micro-batch ", mb, " without forward");
  LOOM_CHECK(split_backward_, "stage ", index_, " I without set_split_backward(true)");
  Live& l = it->second;
  torch::Tensor dx = l.split.input_grad(l.output, is_last() ? torch::Tensor() : grad_output,
                                        is_first() ? torch::Tensor() : l.input, grad_tensors_);
  l.output = l.input = torch::Tensor();
  l.bytes = l.split.held_bytes();
  return dx;
}

void Stage::backward_weight(int mb) {
  Live l = take(mb);
  l.split.weight_grads();
}

void Stage::reset_step_stats() {
  loss_sum_ = correct_ = torch::Tensor();
  counted_ = 0;
}

int64_t Stage::live_activation_bytes() const {
  int64_t n = 0;
  for (const auto& [mb, l] : live_) n += l.bytes;
  return n;
}

}  // namespace loom::parallel
