#pragma once
// TransformerCostModel: the costs of a GPT (transformer.h) cut into pp * loops stages, on a
// cluster (cluster.h), for one Parallel configuration.
//  - Blocks: 0 = embedding, 1..l = layers, l+1 = head (final norm, logits, loss), the order of
//    model::build; a stage is a contiguous run of blocks. Default cut: layers split evenly (the
//    first l mod S stages take one more), embedding on the first stage, head on the last.
//  - Compute, per rank (tensor parallelism splits every matrix product t ways):
//      matrix products: FLOPs / (peak · efficiency(d)), d = cbrt(M·N·K) (cluster curve);
//      elementwise work: twice the activation bytes (written, read back) at the memory
//      bandwidth times its efficiency;
//      tensor parallelism: 2 all-reduces (or reduce-scatter + all-gather with sequence
//      parallelism, same cost) of b·s·h values per layer in the forward, 2 in the backward,
//      2 more with recomputation; the head adds one in its backward, the embedding one in its
//      forward;
//      attention core: standard = two batched products (q kᵀ, probabilities x v) plus the
//      elementwise work on the s² values; flash = half of the 4·b·s²·h/t FLOPs (causal) at
//      the cluster's attention_forward efficiency (of the kernel measured at the shape
//      nearest this head size and sequence), its backward 2.5x that at
//      attention_backward (5 products to the forward's 2: it recomputes the scores), no s²
//      values stored or streamed;
//      --tp-comm-overlap hides min(tp_overlap x the collectives, the GEMMs) of each pass;
//      B = I + W with W = the weight-gradient products (one forward's worth) and I the rest;
//      full recomputation adds one forward to I (and B), selective the attention core's
//      forward (nothing with flash, whose backward already recomputes).
//    When the cluster file has measured [[block]] times for this width, sequence, heads and
//    vocabulary (loom profile) and tp = 1, those are used instead (I = W = B/2: the profile
//    measures B only), scaled linearly between measured micro-batch sizes; so are the measured
//    bytes a block's forward keeps (without recomputation).
//    On a `shared` cluster (CPU cores) ranks beyond the core count time-share them: compute
//    is slowed by ranks / cores.
//  - Pipeline messages: b·s·h activation values, split over the t ranks of a TP group
//    (Megatron's scatter/gather, or sequence parallelism).
//  - Memory: parameters, gradients and optimizer state per precision.h-style byte counts and
//    data-parallel mode (parallel.h); stored activations per transformer.h; with
//    recomputation the working set of one layer's full activations during a backward.
//  - A tied head (--tie-embeddings) is one matrix on one stage. Across stages loom's last stage
//    multiplies by an fp32 copy (its values and gradient counted there, no optimizer state)
//    that comes from the first stage's rank each step and whose gradient goes back before
//    stage 0's reduction; under --megatron Megatron-LM's last stage keeps a second parameter
//    (counted as an untied head) whose gradient the first and last pipeline ranks all-reduce
//    after the data-parallel reduction.
//  - Optimizer: measured ns per parameter (loom profile), else 28 bytes per parameter (read
//    parameter, gradient, two moments; write parameter and moments) at memory bandwidth.
#include <string>
#include <vector>

#include "loom/plan/cluster.h"
#include "loom/plan/cost_model.h"
#include "loom/plan/network.h"
#include "loom/plan/parallel.h"
#include "loom/plan/transformer.h"

namespace loom::plan {

// First block of every stage for an even split; UsageError when stages > layers.
std::vector<int> uniform_cut(int64_t layers, int stages);

class TransformerCostModel : public CostModel {
 public:
  // precision "" = the cluster's; cut empty = uniform_cut.
  TransformerCostModel(const Transformer& m, const Parallel& p, const Cluster& c,
                       const std::string& precision = "", std::vector<int> cut = {});

  int stages() const override { return static_cast<int>(stage_.size()); }
  double compute_s(int stage, schedule::Kind kind) const override;
  double compute_comm_s(int stage, schedule::Kind kind) const override;
  double p2p_s(double bytes, int from, int to) const override {
    return net_.p2p_s(bytes, from, to);
  }
  double collective_s(Collective op, double bytes, const std::vector<int>& g) const override {
    return net_.collective_s(op, bytes, g);
  }
  double boundary_bytes(int stage) const override;
  double receive_s(int stage) const override;
  double grad_bytes(int stage) const override;
  double param_bytes(int stage) const override;
  double sync_bytes(int stage) const override;
  double sync_overlap_steps() const override { return p_.light.overlap_steps; }
  double tied_grad_bytes() const override;
  double tied_copy_bytes() const override;
  StageMemory memory(int stage) const override;
  double optimizer_s(int stage) const override;
  // Bytes per parameter Megatron-LM's mixed-precision optimizer moves besides AdamW's own.
  double megatron_optimizer_extra_bytes() const;
  Collective reduce_collective(DpMode m) const override;
  int shared_cores() const override { return c_.shared ? c_.devices_per_node : 0; }
  double loaded_slowdown(int stage) const override;
  // Beyond the fair share, and the runtime's own CPU, which time-shared cores also run.
  double oversubscribed() const override {
    return c_.shared ? c_.oversubscribed * c_.runtime_cpu : 1;
  }

  const std::vector<int>& cut() const { return cut_; }
  const Precision& precision() const { return prec_; }
  double peak_flops() const { return peak_; }
  // "analytic", "profiled" or "profiled (embedding, layer), analytic (head)".
  std::string compute_source() const;
  // Model FLOPs of one step (Narayanan's count), for TFLOP/s per GPU and MFU.
  double step_flops() const;

 private:
  struct Cost {
    double f = 0, i = 0, w = 0;  // seconds; b = i + w - split_extra
    // How much the runtime's separate I and W take beyond (or below) one fused backward, as
    // the profile measured them; 0 unless it did.
    double split_extra = 0;
    double f_comm = 0, i_comm = 0;
    double params = 0;          // per rank
    double activation = 0;      // stored per micro-batch
    double weight_inputs = 0;   // kept from I to W per micro-batch (StageMemory)
    double working = 0;         // transient in the backward
    double working_input = 0;   // transient in a split backward's I
    double working_weight = 0;  // transient in a W
    double loaded = 0;          // (f + i + w) x the blocks' loaded slowdowns (shared cores)
    double action = 0;          // what each compute action costs beyond its blocks (profiled)
    void add(const Cost& o);
  };
  struct Attn {
    double forward = 0, backward = 0;  // the attention core of one layer, seconds
  };
  Cost analytic(int kind) const;  // 0 embedding, 1 layer, 2 head
  Attn attention(double micro_batch) const;
  LayerRun layer_run() const;
  // Selective recomputation's extra backward time per layer: the core's forward again.
  double selective_extra_s() const;
  // The profile's block of this kind and shape, as measured at tensor-parallel degree `tp`.
  bool profiled(int kind, Cost* out, int64_t tp = 1) const;
  double gemm_s(double m, double n, double k, double batch = 1) const;
  double elementwise_s(double bytes) const;
  // One micro-batch's residual stream [b, s, h] as a tensor-parallel rank holds it: its part
  // of the sequence under sequence parallelism, else all of it.
  double residual_part_bytes() const;
  // Sequence parallelism's backward gathers the input of each product that enters a split
  // region again (the product kept only this rank's part): `inputs` gathers of b·s·h values,
  // posted before the input-gradient products (beside_s) and waited after them, so that a
  // device that communicates on its own hides them; on shared CPU cores nothing is hidden.
  double regather_s(int inputs, double beside_s) const;
  // How many of stage `s`'s blocks are layers (not the embedding, not the head).
  int layers_on(int s) const;

  Transformer m_;           // a tied head across stages (Megatron's copy) counts as untied here
  bool tied_copy_ = false;  // --megatron: Megatron-LM's second parameter
  bool tied_copy_loom_ = false;  // loom's copy (no parameter; parallel/tied_head.h)
  Parallel p_;
  const Cluster& c_;
  Network net_;
  Precision prec_;
  double peak_ = 0;
  std::vector<int> cut_;
  Cost block_[3];
  bool profiled_[3] = {false, false, false};
  bool profiled_at_tp_[3] = {false, false, false};  // measured as a tp shard, not scaled
  // The block's activation bytes count as the profile's (what its forward allocates: its
  // output, not its input), not as the analytic ones (its input, not its output). A profile
  // at another tensor-parallel degree gives times only: the bytes stay analytic.
  bool measured_bytes_[3] = {false, false, false};
  std::vector<Cost> stage_;
};

}  // namespace loom::plan
