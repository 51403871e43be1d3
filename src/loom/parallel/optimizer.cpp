#include "loom/parallel/optimizer.h"

#include <utility>

#include "loom/common/error.h"
#include "loom/parallel/fused_adamw.h"

namespace loom::parallel {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const config::TrainConfig& t) {
  if (t.optimizer == config::Optimizer::AdamW) {
    auto o = torch::optim::AdamWOptions(t.lr)
                 .betas({t.beta1, t.beta2})
                 .eps(t.eps)
                 .weight_decay(t.weight_decay);
    return std::make_unique<FusedAdamW>(std::move(params), o);
  }
  if (t.optimizer == config::Optimizer::Sgd) {
    auto o = torch::optim::SGDOptions(t.lr).momentum(t.momentum).weight_decay(t.weight_decay);
    return std::make_unique<torch::optim::SGD>(std::move(params), o);
  }
  LOOM_USAGE("train.optimizer must be adamw or sgd, got '", t.optimizer, "'");
}

}  // namespace

StageOptimizer::StageOptimizer(std::vector<torch::Tensor> params, const config::TrainConfig& t)
    : params_(params),
      opt_(make_optimizer(std::move(params), t)),
      values_per_element_(t.optimizer == config::Optimizer::AdamW ? 2 : 1) {}

StageOptimizer::~StageOptimizer() = default;

void StageOptimizer::step(double lr, double grad_scale) {
  torch::NoGradGuard no_grad;
  if (grad_scale != 1.0)
    for (const auto& p : params_)
      if (p.grad().defined()) p.grad().mul_(grad_scale);
  for (auto& g : opt_->param_groups()) g.options().set_lr(lr);
  opt_->step();
}

int64_t StageOptimizer::state_bytes() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.numel();
  return values_per_element_ * n * 4;
}

namespace {
const char* const kExpAvg = "adamw.exp_avg";
const char* const kExpAvgSq = "adamw.exp_avg_sq";
const char* const kMomentum = "sgd.momentum";
}  // namespace

bool StageOptimizer::is_adamw() const {
  return values_per_element_ == 2;
}

std::vector<StageOptimizer::State> StageOptimizer::state() const {
  std::vector<State> out;
  const auto& st = opt_->state();
  for (const auto& p : params_) {
    auto it = st.find(p.unsafeGetTensorImpl());
    if (it == st.end()) return {};  // before the first step
    State s;
    if (is_adamw()) {
      const auto& a = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      s[kExpAvg] = a.exp_avg();
      s[kExpAvgSq] = a.exp_avg_sq();
    } else {
      const auto& m = static_cast<const torch::optim::SGDParamState&>(*it->second);
      if (!m.momentum_buffer().defined()) return {};
      s[kMomentum] = m.momentum_buffer();
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> StageOptimizer::state_keys() const {
  if (is_adamw()) return {kExpAvg, kExpAvgSq};
  return {kMomentum};
}

int64_t StageOptimizer::steps() const {
  if (!is_adamw() || params_.empty()) return 0;
  const auto& st = opt_->state();
  auto it = st.find(params_.front().unsafeGetTensorImpl());
  if (it == st.end()) return 0;
  return static_cast<const torch::optim::AdamWParamState&>(*it->second).step();
}

void StageOptimizer::set_state(std::vector<State> states, int64_t steps) {
  LOOM_CHECK_EQ(states.size(), params_.size(), "optimizer state for the wrong tensor count");
  auto& st = opt_->state();
  for (size_t i = 0; i < params_.size(); ++i) {
    const State& s = states[i];
    void* key = params_[i].unsafeGetTensorImpl();
    if (is_adamw()) {
      auto a = std::make_unique<torch::optim::AdamWParamState>();
      a->step(steps);
      a->exp_avg(s.at(kExpAvg).detach().view_as(params_[i]));
      a->exp_avg_sq(s.at(kExpAvgSq).detach().view_as(params_[i]));
      st[key] = std::move(a);
    } else {
      auto m = std::make_unique<torch::optim::SGDParamState>();
      m->momentum_buffer(s.at(kMomentum).detach().view_as(params_[i]));
      st[key] = std::move(m);
    }
  }
}

}  // namespace loom::parallel
