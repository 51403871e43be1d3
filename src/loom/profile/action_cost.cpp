#include "loom/profile/action_cost.h"

#include <algorithm>

#include "loom/model/block_timing.h"
#include "loom/profile/timing.h"

namespace loom::profile {
namespace {

constexpr int kInFlight = model::kTimingInFlight;

void draw_grad(ActionJob& j) {
  if (j.grad.defined()) return;
  torch::NoGradGuard no_grad;
  torch::Tensor y = j.input;
  for (model::Block* layer : j.layers) y = layer->forward(y);
  j.grad = torch::randn_like(y);
}

std::vector<torch::Tensor> copies(const ActionJob& j) {
  std::vector<torch::Tensor> x;
  for (int k = 0; k < kInFlight; ++k) x.push_back(j.input.clone().requires_grad_(true));
  return x;
}

}  // namespace

double depth_first_s(ActionJob& j) {
  draw_grad(j);
  std::vector<torch::Tensor> x = copies(j), y(kInFlight);
  const auto t0 = Clock::now();
  for (int k = 0; k < kInFlight; ++k) {
    y[k] = x[k];
    for (model::Block* layer : j.layers) y[k] = layer->forward(y[k]);
  }
  for (int k = kInFlight - 1; k >= 0; --k) {
    y[k].backward(j.grad);
    y[k] = x[k] = torch::Tensor();
  }
  return seconds(t0);
}

double breadth_first_s(ActionJob& j) {
  draw_grad(j);
  const size_t L = j.layers.size();
  std::vector<std::vector<torch::Tensor>> in(L, std::vector<torch::Tensor>(kInFlight)), out(L);
  in[0] = copies(j);
  const auto t0 = Clock::now();
  for (size_t l = 0; l < L; ++l)
    for (int k = 0; k < kInFlight; ++k) {
      if (l > 0) in[l][k] = out[l - 1][k].detach().requires_grad_(true);
      out[l].push_back(j.layers[l]->forward(in[l][k]));
    }
  for (size_t l = L; l-- > 0;)
    for (int k = kInFlight - 1; k >= 0; --k) {
      out[l][k].backward(l + 1 == L ? j.grad : in[l + 1][k].grad());
      out[l][k] = torch::Tensor();
      if (l + 1 < L) in[l + 1][k] = torch::Tensor();
      if (l == 0) in[0][k] = torch::Tensor();
    }
  return seconds(t0);
}

void sample_action_cost(ActionJob& j, double budget) {
  const double extra_actions = 2.0 * kInFlight * double(j.layers.size() - 1);
  depth_first_s(j);  // warm-up
  breadth_first_s(j);
  const auto t_all = Clock::now();
  for (int it = 0; it < 3 || (seconds(t_all) < budget && it < 1000); ++it) {
    double depth, breadth;
    if (it % 2 == 0) {
      depth = depth_first_s(j);
      breadth = breadth_first_s(j);
    } else {
      breadth = breadth_first_s(j);
      depth = depth_first_s(j);
    }
    j.extra_s.push_back((breadth - depth) / extra_actions);
  }
}

double action_cost_s(const ActionJob& j) {
  return std::max(0.0, model::median_of(j.extra_s));
}

}  // namespace loom::profile
