#pragma once
// --dp-mode allreduce: the stage's gradients are one flat buffer (param_buffer.h), all-reduced
// in buckets (cap parallel.bucket_mib, reverse parameter order, so the first bucket holds the
// parameters whose gradients finish first in the backward). During the stage's last backward
// of the step, a post-hook on each parameter's gradient accumulator marks it ready; a bucket's
// all-reduce starts as soon as all its gradients are ready, overlapped with the rest of the
// backward. REDUCE_GRAD starts any bucket still waiting (unused parameters, or weight gradients
// computed by a W action, which does not run the accumulators). A bucket is a range of the
// gradient buffer: reduced in place, no copy.
#include "loom/parallel/data_parallel.h"

namespace loom::parallel {

// The buffer of the bucketed all-reduce (PowerSGD's too, before it compresses).
BufferOptions allreduce_buffer_options(const config::Config& cfg);

class AllReduceSync : public DataParallel {
 public:
  explicit AllReduceSync(const SyncContext& ctx);
  std::string name() const override { return "allreduce"; }
  void on_last_backward() override { buffer_.arm(); }
  void reduce_grad() override { buffer_.start_grad_sync(); }
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override { buffer_.finish_grad_sync(); }
  // Every replica holds the same averaged gradients: only dp rank 0 contributes, so that the
  // world-wide sum is the squared norm of the full model's gradient.
  double grad_norm_sq() override { return dp_->rank() == 0 ? buffer_.grad_sq_sum() : 0.0; }
  void after_step() override { buffer_.zero_grads(); }
  // buckets, and how many of them the gradient hooks started during the last backward
  // (overlap evidence).
  std::vector<std::pair<std::string, double>> step_metrics() const override {
    return {{"buckets", double(buffer_.buckets().size())},
            {"buckets_overlapped", double(buffer_.buckets_started_by_hooks())}};
  }
};

}  // namespace loom::parallel
