#pragma once
// The optimizer of one stage, owned by the trainer: AdamW (fused, fused_adamw.h) or SGD over
// the tensors the stage's data-parallel mode says to update (DataParallel::optimized_params:
// the stage's parameters, or this rank's flat shard). Its checkpoint state goes through the
// same StateDict interface as the mode's.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/config/config.h"

namespace loom::parallel {

class StageOptimizer {
 public:
  StageOptimizer(std::vector<torch::Tensor> params, const config::TrainConfig& t);
  ~StageOptimizer();
  // One update with the gradients multiplied by grad_scale (in place) at learning rate lr.
  void step(double lr, double grad_scale);
  // Bytes of optimizer state: values per element (AdamW 2, SGD 1) x elements x 4.
  int64_t state_bytes() const;

  // ---- checkpoint state
  // Per optimized tensor, the optimizer's tensors by key ("adamw.exp_avg", "adamw.exp_avg_sq",
  // "sgd.momentum"), each shaped like it; empty before the first step (and for SGD without
  // momentum).
  using State = std::map<std::string, torch::Tensor>;
  std::vector<State> state() const;
  // What a complete State holds.
  std::vector<std::string> state_keys() const;
  // AdamW's step counter (bias correction); 0 for SGD.
  int64_t steps() const;
  // Replaces the state with `states`' tensors (taken, not copied: a resume holds the moments
  // once); states.size() == the optimized tensors, each tensor shaped and placed as its own.
  void set_state(std::vector<State> states, int64_t steps);

 private:
  bool is_adamw() const;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  int values_per_element_;
};

}  // namespace loom::parallel
