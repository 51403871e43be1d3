#pragma once
// --dp-mode diloco: DiLoCo (Douillard et al., "DiLoCo: Distributed Low-Communication Training
// of Language Models", 2023), per pipeline stage; --dp-mode streaming-diloco: its streaming
// form (Douillard et al., "Streaming DiLoCo with overlapping communication", 2025).
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
// Streaming: the stage's parameters are cut into diloco.fragments contiguous groups of about
// equal size (whole parameters, in the stage's order: groups of layers); fragment f meets
// after steps f H / fragments + k H, so the link carries one fragment at a time. Its outer
// gradient travels in diloco.outer_bits (8, 4 or 2: quantized_mean.h; 32: an fp32 all-reduce).
// With diloco.overlap = tau > 0 the exchange runs while the replica makes tau more inner
// steps; the outer step is then applied and the replica's fragment becomes
// mix w_r + (1 - mix) g (diloco.mix), keeping part of what it learnt meanwhile. One fragment,
// 32 bits and no overlap is plain DiLoCo exactly.
//
// g and m are flat tensors on the stage's device beside the parameter buffer; they are the
// same on every replica (replica -1 in checkpoints); the parameters and the inner optimizer's
// state are each replica's own (per_replica()).
#include <memory>

#include "loom/parallel/data_parallel.h"
#include "loom/parallel/quantized_mean.h"

namespace loom::parallel {

class DilocoSync : public DataParallel {
 public:
  explicit DilocoSync(const SyncContext& ctx);
  std::string name() const override { return streaming_ ? "streaming-diloco" : "diloco"; }
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override {}
  // As slim: the mean over replicas of each replica's squared local norm.
  double grad_norm_sq() override { return buffer_.grad_sq_sum() / dp_->size(); }
  void after_step() override;  // the fragments' meetings due after this step
  MemoryBytes memory() const override;
  bool per_replica() const override { return true; }
  // g, m, the step count and the exchanges in flight (their mean outer gradients, received
  // at save time and applied at their step as usual). From a checkpoint of another mode:
  // g = the parameters, m = 0.
  void save(ChunkWriter& w) const override;
  void load(const ChunkReader& r) override;
  void after_load() override;
  // The exchanges in flight applied, then every replica takes the mean of the replicas'
  // parameters (one fp32 all-reduce of the stage), and g with them: one model to evaluate,
  // save and export. Where the replicas have just met this changes nothing.
  void end_of_run() override;
  // diloco_bytes (sent by this rank this step), diloco_outer (fraction of the stage's
  // parameters that took an outer step).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

  // Elements [begin, begin + length) of the flat buffer, meeting after steps offset + k H.
  struct Fragment {
    int64_t begin = 0, length = 0, offset = 0;
  };
  const std::vector<Fragment>& fragments() const { return fragments_; }

 private:
  // An exchange of a fragment's outer gradient, from start() to apply().
  struct Exchange {
    int64_t due = -1;    // the step after which it is applied; -1: none in flight
    comm::WorkPtr work;  // fp32
    std::unique_ptr<QuantizedMean> quantized;  // outer_bits < 32, dp > 1
    std::vector<float> host;                   // the quantized path's values
    bool received = false;                     // delta_ holds the mean
  };
  void start(size_t f);
  double receive(size_t f) const;  // waits; returns the seconds waited
  void apply(size_t f);

  config::DilocoConfig cfg_;
  bool streaming_ = false;
  int outer_bits_ = 32;
  int64_t overlap_ = 0;
  std::vector<Fragment> fragments_;
  mutable std::vector<Exchange> exchanges_;  // save() receives the ones in flight
  torch::Tensor global_, momentum_, delta_;  // flat, as the parameter buffer
  int64_t steps_ = 0;
  bool fresh_ = false;  // load() found no diloco state
  double bytes_ = 0, outer_ = 0;
};

}  // namespace loom::parallel
