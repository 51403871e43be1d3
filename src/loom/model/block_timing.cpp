#include "loom/model/block_timing.h"

#include <algorithm>
#include <chrono>

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
                             torch::Tensor& grad, const LossFn& loss) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<torch::Tensor> inputs, outputs;
  for (int k = 0; k < kTimingInFlight; ++k) inputs.push_back(input.clone());
  InFlightTimes t;
  for (const torch::Tensor& x : inputs) {
    const auto t0 = Clock::now();
    outputs.push_back(forward_for_timing(block, x, target, loss));
    t.forward_s.push_back(since(t0));
  }
  if (!target.defined() && !grad.defined()) grad = torch::randn_like(outputs.front());
  for (int k = kTimingInFlight - 1; k >= 0; --k) {
    const auto t0 = Clock::now();
    if (target.defined())
      outputs[k].backward();
    else
      outputs[k].backward(grad);
    t.backward_s.push_back(since(t0));
    outputs[k] = torch::Tensor();  // its graph, freed as the runtime frees it
  }
  return t;
}

double median_of(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace loom::model
