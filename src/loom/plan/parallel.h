#pragma once
// One training configuration to simulate: the mesh, the batch split, the schedule and the
// data-parallel mode. Global batch = dp * microbatches * micro_batch samples.
#include <cstdint>
#include <string>

#include "loom/config/config.h"
#include "loom/plan/network.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

namespace loom::plan {

// Data-parallel modes (what is sharded over dp; docs/zero.md, Modes and Formulas):
//   allreduce  nothing; gradients all-reduced (REDUCE_GRAD)
//   zero1      optimizer state; gradients reduce-scattered, parameters all-gathered after the
//              optimizer step
//   zero2      zero1 + gradients (a full gradient buffer lives from the stage's first backward
//              to its REDUCE_GRAD)
//   zero3      zero2 + parameters, gathered by UNSHARD before use, freed by RESHARD
// and the light modes, simulated from a training configuration (LightDp below): slim, quant,
// diloco and streaming-diloco; powersgd is not simulated.
using config::DpMode;
// Any data-parallel mode's name; UsageError for unknown names.
DpMode parse_dp_mode(const std::string& text);
// UsageError unless the simulator models `m`; `from_config`: the light modes' settings come
// from a training configuration (simulate --from-config), so they are simulated only then.
void check_simulated(DpMode m, bool from_config = false);
// UsageError unless the planner searches `m` (allreduce, zero1, zero2, zero3).
void check_planned(DpMode m);

// What a light data-parallel mode moves and holds, per parameter of a stage, averaged over
// steps: a mode that meets every k steps sends 1/k of its message in each simulated step
// (docs/planner.md, Light data parallelism).
struct LightDp {
  // REDUCE_GRAD's bytes as a fraction of an fp32 all-reduce of the gradients (quant: its
  // quantized codes and scales; slim and diloco exchange no gradient: 0).
  double reduce = 1;
  // After the optimizer step: an all-reduce of this fraction of the stage's fp32 parameters
  // (slim: the synchronized coordinates; diloco: the outer gradient; streaming: quantized).
  double sync = 0;
  // streaming-diloco: the sync runs behind this many of the next inner steps.
  double overlap_steps = 0;
  // Bytes per parameter the mode keeps besides parameters, gradients and the optimizer's
  // state (slim: g and u; quant: residual and buffers; diloco: g, outer gradient, momentum).
  double state_bytes = 0;
  // Bytes per parameter of element-wise memory traffic per step (encode / decode, selection,
  // the outer step), timed as the optimizer's.
  double codec_bytes = 0;
  bool operator==(const LightDp&) const = default;
};
// The configuration's dp-mode as LightDp (allreduce and zero: the defaults);
// UsageError for powersgd.
LightDp light_dp(const config::Config& cfg);
// The data-parallel actions schedule::lower inserts for `m` on dp replicas; the runtime
// (train/) lowers with it too, so that simulated and executed action lists are the same.
schedule::DpMode lowering_mode(DpMode m, int dp);

using config::Recompute;
Recompute parse_recompute(const std::string& text);  // UsageError unless none|selective|full
// How the attention core softmax(q kᵀ) v runs: as separate kernels that store the s x s
// scores and probabilities, or as one fused flash kernel that stores neither.
enum class Attention { Standard, Flash };
Attention parse_attention(const std::string& text);  // UsageError unless standard|flash
std::string name_of(Attention a);

// Bytes per parameter and per activation element.
//   bf16 / fp16: mixed precision (Megatron): 2-byte params and grads, 12 bytes of optimizer
//                state (fp32 master copy, Adam m and v), 2-byte activations;
//   fp32:        loom's CPU runtime (parallel/param_buffer.h, zero_sync.h): 4-byte params
//                and grads, AdamW m and v (8 bytes), 4-byte activations; allreduce reduces
//                its buckets in place (one copy of the gradients); zero1/zero2 keep the rank's
//                parameter shard besides the full parameters, and zero1 all-reduces.
// Bytes per parameter of the state and per value of the activations. bf16 and fp16 as loom
// trains them: autocast over fp32 parameters, gradients and residual stream (the products and
// most activations in bf16, AdamW's two fp32 moments), or as Megatron-LM does (`megatron`):
// bf16 parameters, gradients and activations, an fp32 master copy and moments in the optimizer.
struct Precision {
  std::string name;
  double param = 2, grad = 2, optimizer = 12, activation = 2;
  double residual = 2;            // the residual stream (LayerRun::residual_bytes)
  bool sharded_master = false;    // zero1/zero2: + params/d
  bool zero1_all_reduce = false;  // zero1 REDUCE_GRAD is an all-reduce
};
Precision precision(const std::string& name, bool megatron = false);  // UsageError for unknown

struct Parallel {
  int dp = 1, pp = 1, tp = 1;
  int loops = 1;
  int microbatches = 1;
  int64_t micro_batch = 1;  // samples per micro-batch
  std::string schedule = "1f1b";
  DpMode dp_mode = DpMode::AllReduce;
  Recompute recompute = Recompute::None;  // transformer.h: what each variant keeps and redoes
  Attention attention = Attention::Standard;
  bool sequence_parallel = false;  // Korthikanti 2022; only with tp > 1
  // Tensor-parallel all-gathers / reduce-scatters overlapped with the GEMMs next to them
  // (Megatron-Core --tp-comm-overlap; needs sequence parallelism), as far as the cluster's
  // tp_overlap says.
  bool tp_comm_overlap = false;
  // Megatron-Core's distributed optimizer (dp-mode zero1 with its buffers): fp32 gradients
  // reduce-scattered in buckets during the backward, bf16 parameters all-gathered after the
  // step and overlapped with the next step's forward (--overlap-param-gather).
  bool distributed_optimizer = false;
  // The run as Megatron-LM keeps its memory where it differs from loom's runtime: mixed
  // precision with bf16 parameters, gradients and residual stream (Precision), and a stage's
  // output freed once sent (loom keeps it until the stage's backward).
  bool megatron = false;
  bool reshard_after_forward = true;  // zero3
  int max_unsharded = 2;              // zero3 prefetch bound
  LightDp light;                      // slim, quant, diloco, streaming-diloco
  config::RankOrder placement = config::RankOrder::DpInside;  // where the dp groups lie

  Mesh mesh() const { return {dp, pp, tp, placement}; }
  int gpus() const { return dp * pp * tp; }
  int64_t global_batch() const { return int64_t(dp) * microbatches * micro_batch; }
  schedule::Shape shape() const {
    return {pp, loops, microbatches, schedule::placement_of(schedule)};
  }
  // "dp=8 pp=4 tp=8 bfs v=2 m=8 b=1 zero3 recompute=full flash sp"
  std::string describe() const;
};

}  // namespace loom::plan
