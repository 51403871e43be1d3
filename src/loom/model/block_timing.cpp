#include "loom/model/block_timing.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "loom/model/linear_uses.h"

namespace loom::model {

torch::Tensor forward_for_timing(Block& block, const torch::Tensor& input,
                                 const torch::Tensor& target, const LossFn& loss) {
  torch::Tensor x = input.is_floating_point() ? input.detach().requires_grad_(true) : input;
  torch::Tensor y = block.forward(x);
  if (target.defined()) y = loss(y, target);
  return y;
}

double time_forward_backward(Block& block, const torch::Tensor& input, const torch::Tensor& target,
                             torch::Tensor& grad, const LossFn& loss) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor y = forward_for_timing(block, input, target, loss);
  if (target.defined()) {
    y.backward();
  } else {
    if (!grad.defined()) grad = torch::randn_like(y);
    y.backward(grad);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

InFlightTimes time_in_flight(Block& block, const torch::Tensor& input, const torch::Tensor& target,
                             torch::Tensor& grad, const LossFn& loss,
                             const std::vector<torch::Tensor>* split_weights) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const bool floats = input.is_floating_point();
  std::vector<torch::Tensor> inputs, outputs;
  std::vector<SplitBackward> splits(split_weights ? kTimingInFlight : 0);
  for (int k = 0; k < kTimingInFlight; ++k)
    inputs.push_back(floats ? input.clone().requires_grad_(true) : input.clone());
  InFlightTimes t;
  for (int k = 0; k < kTimingInFlight; ++k) {
    const auto t0 = Clock::now();
    torch::Tensor y;
    {
      std::optional<RecordLinearUses> record;
      if (split_weights) record.emplace(&splits[k].uses);
      y = block.forward(inputs[k]);
    }
    outputs.push_back(target.defined() ? loss(y, target) : y);
    t.forward_s.push_back(since(t0));
  }
  if (!target.defined() && !grad.defined()) grad = torch::randn_like(outputs.front());
  const torch::Tensor g = target.defined() ? torch::Tensor() : grad;
  for (int k = kTimingInFlight - 1; k >= 0; --k) {
    auto t0 = Clock::now();
    if (split_weights) {
      splits[k].input_grad(outputs[k], g, inputs[k], *split_weights);
      t.input_s.push_back(since(t0));
      t0 = Clock::now();
      splits[k].weight_grads();
      t.weight_s.push_back(since(t0));
      t.backward_s.push_back(t.input_s.back() + t.weight_s.back());
    } else {
      outputs[k].backward(g);
      t.backward_s.push_back(since(t0));
    }
    outputs[k] = inputs[k] = torch::Tensor();  // its graph, freed as the runtime frees it
  }
  return t;
}

double median_of(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace loom::model
