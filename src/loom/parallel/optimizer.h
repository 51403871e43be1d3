#pragma once
// The optimizer of one stage, owned by the trainer: AdamW (fused, fused_adamw.h) or SGD over
// the tensors the stage's data-parallel mode says to update (DataParallel::optimized_params:
// the stage's parameters, or this rank's flat shard). Its checkpoint state goes through the
// same StateDict interface as the mode's.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "loom/config/config.h"
#include "loom/parallel/state_dict.h"

namespace loom::parallel {

class StageOptimizer : public StateDict {
 public:
  StageOptimizer(std::vector<torch::Tensor> params, const config::TrainConfig& t);
  ~StageOptimizer() override;
  // One update with the gradients multiplied by grad_scale (in place) at learning rate lr.
  void step(double lr, double grad_scale);
  // Bytes of optimizer state: values per element (AdamW 2, SGD 1) x elements x 4.
  int64_t state_bytes() const;
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  int values_per_element_;
};

}  // namespace loom::parallel
