#pragma once
// --dp-mode zero1 / zero2 / zero3: sharded data parallelism on the stage's flat buffer
// (param_buffer.h), padded to dp shards. Rank i of the DP group owns shard i; the trainer's
// optimizer holds only that shard (AdamW and SGD are elementwise, so a flat shard is updated
// exactly as the separate tensors would be).
//
//   zero1  grads: flat buffer of the full stage, all-reduced in buckets that start during the
//          last backward (as allreduce does); each rank updates its shard; all-gather params.
//   zero2  grads: the full flat gradient exists only from the stage's first backward of the
//          step to finish_grad_sync(); REDUCE_GRAD reduce-scatters it into the rank's shard
//          (one call per stage and step). Update shard, all-gather params.
//   zero3  as zero2, and parameters are sharded between uses: UNSHARD starts an all-gather
//          into a fresh buffer, the stage's next compute waits for it and points the parameters
//          at views of it, RESHARD points them at an empty tensor and drops the buffer.
//
// zero1/zero2 start the parameter all-gather after the update and wait for it right before the
// stage's next compute (or whenever the full parameters are read), so it overlaps whatever
// comes first in the next step (on later pipeline ranks: waiting for the first activation).
//
// Memory per stage and rank (P = padded parameter count, d = dp, k = optimizer values per
// parameter: 2 for AdamW, 1 for SGD; 4 bytes each):
//   zero1  params P + P/d (full + master shard)   grads P            optimizer kP/d
//   zero2  params P + P/d                          grads P/d + P(*)   optimizer kP/d
//   zero3  params P/d + P(*)                       grads P/d + P(*)   optimizer kP/d
// (*) transient working set, reported at its peak in MemoryBytes::working.
#include "loom/parallel/data_parallel.h"

namespace loom::parallel {

class ZeroSync : public DataParallel {
 public:
  // level: 1, 2 or 3.
  ZeroSync(const SyncContext& ctx, int level);
  std::string name() const override { return "zero" + std::to_string(level_); }
  void unshard() override;
  void reshard() override { buffer_.drop_params(); }  // zero1/2: nothing to drop
  void before_compute(bool backward) override;
  void on_last_backward() override { buffer_.arm(); }
  void reduce_grad() override { buffer_.start_grad_sync(); }
  std::vector<torch::Tensor> optimized_params() override { return {buffer_.shard_params()}; }
  void finish_grad_sync() override { buffer_.finish_grad_sync(); }
  // Shards partition the stage: every rank contributes its own, the world sum is the total.
  double grad_norm_sq() override { return buffer_.grad_sq_sum(); }
  void before_step() override;
  void after_step() override;
  std::vector<NamedParam> full_params() override;
  // The master shard: pieces of every parameter it cuts through (padding excluded).
  std::vector<Piece> pieces() const override;
  void load(const ChunkReader&) override { buffer_.finish_param_sync(); }
  void after_load() override;  // the full parameters from every rank's loaded shard

 private:
  int level_;
};

}  // namespace loom::parallel
