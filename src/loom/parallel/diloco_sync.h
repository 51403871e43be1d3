#pragma once
// --dp-mode diloco: DiLoCo (Douillard et al., "DiLoCo: Distributed Low-Communication Training
// of Language Models", 2023), per pipeline stage.
//
// Each replica trains its own parameters with the trainer's optimizer (the inner one:
// train.optimizer, usually AdamW) on its own gradients: no gradient is exchanged. Every H steps
// (diloco.inner_steps) the replicas meet once:
//   outer gradient   delta = mean over replicas of (g - w_r), g the parameters of the last
//                    meeting (the same on every replica), w_r the replica's own: one all-reduce
//                    of the stage's parameters;
//   outer step       Nesterov SGD on delta (diloco.outer_lr, diloco.outer_momentum):
//                    m = mu m + delta, g -= lr (delta + mu m) (plain momentum: g -= lr m);
//   every replica    w_r = g (its inner optimizer state stays its own).
// With H = 1, outer lr 1, momentum 0 and inner SGD this is the all-reduce step exactly in
// exact arithmetic (g - mean(g - w_r) = mean(w_r) = g - lr mean(grad_r)); tested within fp32
// rounding.
//
// g and m are flat tensors on the stage's device beside the parameter buffer; they are the
// same on every replica (replica -1 in checkpoints); the parameters and the inner optimizer's
// state are each replica's own (per_replica()).
#include "loom/parallel/data_parallel.h"

namespace loom::parallel {

class DilocoSync : public DataParallel {
 public:
  explicit DilocoSync(const SyncContext& ctx);
  std::string name() const override { return "diloco"; }
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override {}
  // As slim: the mean over replicas of each replica's squared local norm.
  double grad_norm_sq() override { return buffer_.grad_sq_sum() / dp_->size(); }
  void after_step() override;  // the outer step, every H steps
  MemoryBytes memory() const override;
  bool per_replica() const override { return true; }
  // g, m and the step count. From a checkpoint of another mode: g = the parameters, m = 0.
  void save(ChunkWriter& w) const override;
  void load(const ChunkReader& r) override;
  void after_load() override;
  // diloco_bytes (sent by this rank this step), diloco_outer (1 on a step with an outer step).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

 private:
  void outer_step();

  config::DilocoConfig cfg_;
  torch::Tensor global_, momentum_;  // flat, as the parameter buffer
  int64_t steps_ = 0;
  bool fresh_ = false;  // load() found no diloco state
  double bytes_ = 0, outer_ = 0;
};

}  // namespace loom::parallel
