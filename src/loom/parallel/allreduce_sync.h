#pragma once
// --dp-mode allreduce: gradients grouped into buckets (cap parallel.bucket_mib, reverse
// parameter order, so the first bucket holds the parameters whose gradients finish first in
// the backward). During the stage's last backward of the step, a post-hook on each parameter's
// gradient accumulator marks it ready; a bucket's all-reduce starts as soon as all its
// gradients are ready, overlapped with the rest of the backward. REDUCE_GRAD starts any bucket
// still waiting (unused parameters, or weight gradients computed by a W action, which does not
// run the accumulators).
#include "loom/parallel/grad_buckets.h"
#include "loom/parallel/grad_sync.h"

namespace loom::parallel {

class AllReduceSync : public GradSync {
 public:
  explicit AllReduceSync(const SyncContext& ctx);
  ~AllReduceSync() override;
  std::string name() const override { return "allreduce"; }
  void on_last_backward() override;
  void reduce_grad() override;
  void finish() override;
  double grad_norm_sq() override;
  void step(double lr, double grad_scale) override;
  MemoryBytes memory() const override;
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;
  int num_buckets() const { return plan_.size(); }
  // buckets, and how many of them the gradient hooks started during the last backward.
  std::vector<std::pair<std::string, double>> step_metrics() const override {
    return {{"buckets", double(plan_.size())}, {"buckets_overlapped", double(started_by_hooks_)}};
  }
  // How many buckets the hooks started before REDUCE_GRAD in the last step (overlap evidence).
  int buckets_started_by_hooks() const { return started_by_hooks_; }

 private:
  struct Bucket {  // per bucket of plan_
    torch::Tensor flat;
    comm::WorkPtr work;
  };
  void launch(int b);

  Stage* stage_;
  comm::Backend* dp_;
  std::vector<torch::Tensor> params_;
  GradBuckets plan_;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  std::unique_ptr<torch::optim::Optimizer> opt_;
  int started_by_hooks_ = 0;
};

}  // namespace loom::parallel
