#pragma once
// One stage's parameters and gradients as two flat fp32 buffers (flat_layout.h) on the stage's
// device, shared by
// every data-parallel mode. The stage's parameter tensors are views of the parameter buffer and
// their .grad are views of the gradient buffer, so autograd accumulates straight into it and a
// gradient bucket is a range of it (no bucket copies).
//
//   gradient sync   start_grad_sync() / finish_grad_sync(): an all-reduce per bucket (the
//                   buckets of the last backward start from autograd hooks, the rest when
//                   started), or, with transient gradients, one reduce-scatter into this
//                   rank's gradient shard. Afterwards shard_grads() is the mean over dp.
//   parameter sync  start_param_sync() / finish_param_sync(): an all-gather of this rank's
//                   master shard into the full parameter buffer (sharded layouts only).
//
// Unsharded (allreduce, slim, quant): one shard, the shard is the full buffer. Sharded (zero):
// padded to dp shards; rank i keeps a master copy of shard i (what its optimizer updates).
// Transient gradients (zero2/3): the full gradient exists from the stage's first backward of
// the step to finish_grad_sync(). Transient parameters (zero3): the full parameters exist from
// start_param_sync() to drop_params().
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/parallel/flat_layout.h"
#include "loom/parallel/grad_buckets.h"
#include "loom/parallel/memory_bytes.h"
#include "loom/parallel/stage.h"

namespace loom::parallel {

struct BufferOptions {
  bool sharded = false;           // padded to dp shards, master shard per rank
  bool transient_grads = false;   // zero2/3 (needs sharded)
  bool transient_params = false;  // zero3 (needs transient_grads)
  bool buckets = false;           // bucketed all-reduce (allreduce, zero1)
  double bucket_mib = 25;
  bool bf16_reduce = false;  // gradients travel as bf16 (parallel.grad_reduce), summed in it
};

class ParamBuffer {
 public:
  ParamBuffer(Stage& stage, comm::Backend& dp, const BufferOptions& o);
  ~ParamBuffer();
  ParamBuffer(const ParamBuffer&) = delete;
  ParamBuffer& operator=(const ParamBuffer&) = delete;

  const FlatLayout& layout() const { return layout_; }
  const GradBuckets& buckets() const { return plan_; }
  // Full flat buffers; undefined while transient and absent.
  const torch::Tensor& params() const { return params_; }
  const torch::Tensor& grads() const { return grads_; }
  // What this rank updates: the master shard and its gradient (unsharded: the full buffers).
  const torch::Tensor& shard_params() const { return sharded_ ? master_ : params_; }
  const torch::Tensor& shard_grads() const { return shard_grads_; }

  // ---- gradients
  void ensure_grads();      // full gradient allocated (zero), parameters' .grad are its views
  void arm();               // the stage's last backward begins: hooks start full buckets
  void start_grad_sync();   // starts every reduction not started yet
  void finish_grad_sync();  // waits; shard_grads() is then the mean over dp
  void zero_grads();        // after the update: persistent gradients back to zero
  // Squared norm of shard_grads(), parameters replicated on a tensor-parallel group weighted
  // 1 / tp (the world's sum counts them once).
  double grad_sq_sum() const;
  int buckets_started_by_hooks() const { return started_by_hooks_; }

  // ---- parameters
  void start_param_sync();        // all-gather of the master shards (transient: into a new buffer)
  void finish_param_sync();       // waits; the stage's parameters are views of params()
  void drop_params();             // transient: parameters empty, buffer freed
  torch::Tensor gathered_copy();  // full parameters, gathered now if absent (collective)

  // ---- accounting
  int64_t working_bytes() const;  // transient full-size bytes held now
  MemoryBytes memory() const;     // params and grads held, working peak; optimizer 0
  double exposed_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }

 private:
  void wait(comm::WorkPtr& w);
  void launch(int bucket);
  void bind_params();
  void unbind_params();
  void note_working();

  std::vector<torch::Tensor> tensors_;  // the stage's parameters
  comm::Backend& dp_;
  const bool sharded_, transient_grads_, transient_params_;
  std::vector<double> norm_weight_;  // per parameter, in grad_sq_sum(); empty: all 1
  const int d_, rank_;
  torch::TensorOptions options_;  // fp32 on the stage's device
  FlatLayout layout_;
  torch::Tensor params_, grads_, master_, shard_grads_;
  bool bound_ = false;  // parameters currently point into params_
  bool grad_sync_started_ = false;
  comm::WorkPtr gather_, scatter_;
  GradBuckets plan_;
  std::vector<comm::WorkPtr> bucket_work_;
  // bf16 reduction: what travels, copied back into the fp32 gradients when it arrived.
  const bool bf16_reduce_;
  std::vector<torch::Tensor> bucket_bf16_;
  torch::Tensor grads_bf16_, shard_bf16_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  int started_by_hooks_ = 0;
  int64_t peak_params_ = 0, peak_grads_ = 0, peak_working_ = 0;  // transient, bytes
  double exposed_s_ = 0;
};

}  // namespace loom::parallel
