#pragma once
// --dp-mode zero1 / zero2 / zero3: sharded data parallelism on one flat buffer per stage
// (flat_layout.h). Rank i of the DP group owns shard i; its optimizer holds only that shard
// (AdamW and SGD are elementwise, so a flat shard is updated exactly as the separate tensors
// would be).
//
//   zero1  grads: flat buffer of the full stage, all-reduced in buckets that start during the
//          last backward (as allreduce does); each rank updates its shard; all-gather params.
//   zero2  grads: the full flat gradient exists only from the stage's first backward of the
//          step to finish(); REDUCE_GRAD reduce-scatters it into the rank's shard (one call per
//          stage and step). Update shard, all-gather params.
//   zero3  as zero2, and parameters are sharded between uses: UNSHARD starts an all-gather
//          into a fresh buffer, the stage's next compute waits for it and points the parameters
//          at views of it, RESHARD points them at an empty tensor and drops the buffer.
//
// zero1/zero2 start the parameter all-gather in step() and wait for it right before the
// stage's next compute (or whenever the full parameters are read), so it overlaps whatever
// comes first in the next step (on later pipeline ranks: waiting for the first activation).
//
// Memory per stage and rank (P = padded parameter count, d = dp, k = optimizer values per
// parameter: 2 for AdamW, 1 for SGD; 4 bytes each):
//   zero1  params P + P/d (full + master shard)   grads P            optimizer kP/d
//   zero2  params P + P/d                          grads P/d + P(*)   optimizer kP/d
//   zero3  params P/d + P(*)                       grads P/d + P(*)   optimizer kP/d
// (*) transient working set, reported at its peak in MemoryBytes::working.
#include <torch/torch.h>

#include "loom/parallel/flat_layout.h"
#include "loom/parallel/grad_buckets.h"
#include "loom/parallel/grad_sync.h"

namespace loom::parallel {

class ZeroSync : public GradSync {
 public:
  // level: 1, 2 or 3.
  ZeroSync(const SyncContext& ctx, int level);
  ~ZeroSync() override;
  std::string name() const override { return "zero" + std::to_string(level_); }
  void unshard() override;
  void reshard() override;
  void before_compute(bool backward) override;
  void on_last_backward() override;
  void reduce_grad() override;
  void finish() override;
  double grad_norm_sq() override;
  void step(double lr, double grad_scale) override;
  MemoryBytes memory() const override;
  int64_t working_bytes() const override;
  std::vector<NamedParam> full_params() override;
  bool saves_params() const override { return true; }
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

  const FlatLayout& layout() const { return layout_; }

 private:
  void make_buckets(double cap_mib);
  void launch(int bucket);
  void wait(comm::WorkPtr& w);
  void start_gather();
  void bind_params();      // parameters -> views of full_
  void unbind_params();    // parameters -> empty tensors (zero3)
  void ensure_grads();     // full flat gradient allocated, parameter grads are views of it
  void release_grads();    // zero2/3: drop the full gradient
  void note_working();     // peak bookkeeping

  Stage* stage_;
  comm::Backend* dp_;
  int level_;
  int d_, rank_;
  std::vector<torch::Tensor> params_;
  FlatLayout layout_;
  torch::Tensor shard_param_;  // this rank's shard of the parameters: the optimizer's tensor
  torch::Tensor shard_grad_;   // its gradient (zero1: a view into grads_)
  torch::Tensor full_;         // gathered flat parameters (zero3: only while unsharded)
  torch::Tensor grads_;        // flat gradient of the full stage (zero2/3: only transiently)
  bool bound_ = false;         // parameters currently point into full_
  comm::WorkPtr gather_;       // all-gather into full_ in flight
  comm::WorkPtr scatter_;      // reduce-scatter of grads_ in flight (zero2/3)
  bool reduce_started_ = false;
  GradBuckets plan_;                   // zero1: ranges of the flat gradient
  std::vector<comm::WorkPtr> bucket_work_;  // per bucket of plan_
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  std::unique_ptr<torch::optim::Optimizer> opt_;
  int optimizer_values_ = 2;   // per parameter: AdamW 2, SGD 1
  int64_t peak_full_ = 0, peak_grads_ = 0, peak_working_ = 0;  // bytes
};

}  // namespace loom::parallel
