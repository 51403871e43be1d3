#pragma once
// --dp-mode quant: all-reduce of quantized gradients with error feedback, the baseline the
// Slim-DP paper compares with. Per stage, per step (dp = d > 1):
//   x = grad + e                       e: this rank's residual from the previous step
//   q = quant(x)                       blockwise symmetric, quant.bits, one fp32 scale per
//                                      quant.block values (quantize.h)
//   e = x - dequant(q)                 stays on this rank for the next step
//   mean of q over the replicas        a reduce-scatter by all-to-all of the quantized shards
//                                      and an all-gather of the re-quantized means
//                                      (quantized_mean.h)
// The error of the second quantization is not fed back: only the local residual is kept
// (docs/slim-dp.md, Quantized all-reduce); quant.gather_bits may give it more bits than the
// first.
// Both messages are quantized, so the byte counters see about (bits/8 + 4/block)/4 of the fp32
// all-reduce. REDUCE_GRAD starts the all-to-all; finish_grad_sync() completes the exchange and
// writes the mean into the stage's flat gradient buffer (param_buffer.h). With d == 1 gradients
// are used as they are.
#include <algorithm>
#include <memory>

#include "loom/parallel/data_parallel.h"
#include "loom/parallel/quantized_mean.h"

namespace loom::parallel {

class QuantSync : public DataParallel {
 public:
  explicit QuantSync(const SyncContext& ctx);
  std::string name() const override { return "quant"; }
  void reduce_grad() override;
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override;
  // Every replica holds the same mean: dp rank 0 only.
  double grad_norm_sq() override { return dp_->rank() == 0 ? buffer_.grad_sq_sum() : 0.0; }
  void after_step() override { buffer_.zero_grads(); }
  // The residual was computed from the dropped (non-finite) gradients: error feedback starts
  // again from zero.
  void drop_step() override { std::fill(e_.begin(), e_.end(), 0.0f); }
  MemoryBytes memory() const override;
  // The residual, per replica. A checkpoint without one for this replica (another mode, or
  // another dp) leaves it zero: error feedback starts afresh.
  void save(ChunkWriter& w) const override;
  void load(const ChunkReader& r) override;
  // quant_bytes (sent by this rank in the step), quant_sync_fraction (1: every coordinate),
  // quant_residual (||e|| / ||x|| after this step's first quantization).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

  const std::vector<float>& residual() const { return e_; }  // padded to d * shard values
  int64_t numel() const { return n_; }

 private:
  int64_t n_ = 0;
  std::unique_ptr<QuantizedMean> mean_;  // dp > 1
  std::vector<float> x_, e_;
  double bytes_ = 0, residual_ = 0;
};

}  // namespace loom::parallel
