#pragma once
// The cost model interface (the idea of flexflow-train's cost estimator): everything the
// simulator asks about time and memory, and nothing about schedules. Implementations:
//  - ConstantCostModel (below): fixed numbers, for tests against totals computed by hand;
//  - TransformerCostModel (transformer_model.h): analytic FLOPs and bytes over a cluster file,
//    or per-block times measured by `loom profile`.
#include <utility>
#include <vector>

#include "loom/plan/network.h"
#include "loom/plan/parallel.h"
#include "loom/schedule/action.h"

namespace loom::plan {

// Bytes one rank holds for one stage.
struct StageMemory {
  double params = 0;       // resident parameters (the shard under zero3)
  double grads = 0;        // resident gradients (the shard under zero2/zero3)
  double optimizer = 0;    // optimizer state (the shard under zero1/2/3)
  double gathered = 0;     // zero3: full parameters between UNSHARD and RESHARD
  double grad_buffer = 0;  // zero2/3: full gradients from the first backward to REDUCE_GRAD
  double activation = 0;   // kept per in-flight micro-batch, from F to its B (or W)
  // Kept per micro-batch from its I to its W (the split backward: the products' inputs and
  // output gradients); < 0 when the model does not know: the activation then stays to W.
  double weight_inputs = -1;
  double working = 0;  // transient inside one backward (recomputed layer, logits)
  // Transient inside a split backward's I (no weight gradients; the products' output
  // gradients kept for W); < 0: as `working`.
  double working_input = -1;
  double working_weight = 0;  // transient inside a W (a weight gradient, its gathered input)
  // Of a received input (kept from the F to the end of its B or I), the bytes `activation`
  // does not count: a measured block counts what its forward allocates, not its input.
  double received_input = 0;
  // Tables the layers share, one copy a rank whatever its stages (the causal mask, rotary
  // angles); the simulator counts them with the parameters.
  double buffers = 0;
  // What a checkpoint copies of the stage (parallel/stage_state.cpp): the parameters its
  // optimizer updates (a shard under zero1/2/3), their optimizer state and a light mode's own.
  double saved = 0;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual int stages() const = 0;
  // Seconds of one compute action (F, B, I or W) of one micro-batch on `stage`.
  virtual double compute_s(int stage, schedule::Kind kind) const = 0;
  // The part of compute_s spent in communication inside the action (tensor parallelism).
  virtual double compute_comm_s(int stage, schedule::Kind kind) const { return 0; }
  // A message between two world ranks, and a collective over a group of world ranks
  // (`bytes` as in network.h).
  virtual double p2p_s(double bytes, int from_rank, int to_rank) const = 0;
  virtual double collective_s(Collective op, double bytes, const std::vector<int>& group) const = 0;
  // Bytes one rank sends from `stage` to `stage + 1` for one micro-batch (the activation; its
  // gradient travels back with the same size).
  virtual double boundary_bytes(int stage) const = 0;
  // Seconds from a message's arrival until the receiver can use it (Megatron-LM's
  // scatter/gather: the receiving tensor-parallel ranks all-gather their slices).
  virtual double receive_s(int stage) const { return 0; }
  // Data-parallel traffic of one rank for a stage: full gradient bytes (REDUCE_GRAD; quant: its
  // quantized message, 0 for the modes that exchange no gradient) and full parameter bytes
  // (UNSHARD, and the zero1/zero2 all-gather after the optimizer step).
  virtual double grad_bytes(int stage) const = 0;
  virtual double param_bytes(int stage) const = 0;
  // The light data-parallel modes (parallel.h, LightDp): the bytes of the all-reduce after the
  // optimizer step (slim's coordinates, DiLoCo's outer gradient), averaged per step.
  virtual double sync_bytes(int stage) const { return 0; }
  // streaming-diloco: how many following steps that all-reduce runs behind.
  virtual double sync_overlap_steps() const { return 0; }
  // A head tied to the token embedding on a pipeline (Megatron-LM's GPT): the last stage keeps
  // a copy, and the ranks of the first and the last stage all-reduce its gradient after the
  // data-parallel reduction. Its bytes; 0 = no such exchange.
  virtual double tied_grad_bytes() const { return 0; }
  // loom's head tied across stages (parallel/tied_head.h): the last stage multiplies by a copy
  // of the embedding (no parameter) that the first stage's rank sends after its first forward;
  // the copy's gradient goes back once both ranks' lists are done, and stage 0's reduction waits
  // for it. The bytes of each of those messages; 0 = no copy.
  virtual double tied_copy_bytes() const { return 0; }
  virtual StageMemory memory(int stage) const = 0;
  // Optimizer update of the rank's share of the stage, after the step's communication.
  virtual double optimizer_s(int stage) const { return 0; }
  // The collective of REDUCE_GRAD: reduce-scatter for zero1/2/3, all-reduce for the others.
  virtual Collective reduce_collective(DpMode m) const {
    return config::zero_level(m) > 0 ? Collective::ReduceScatter : Collective::AllReduce;
  }
  // Shared hardware (the CPU cores of one machine, `shared = true` in a cluster file): the
  // number of cores all ranks share; 0 = every rank has a device of its own. On shared
  // hardware compute_s and optimizer_s are the times of a rank computing ALONE, and the
  // simulator slows each action by how many ranks compute at that moment.
  virtual int shared_cores() const { return 0; }
  // On shared hardware: how many times longer `stage`'s compute takes when every core computes
  // than when it computes alone (>= 1: the cores share memory bandwidth and caches, and
  // virtual CPUs may share a physical core).
  virtual double loaded_slowdown(int stage) const { return 1; }
  // On shared hardware with more ranks than cores: how many times slower every compute runs
  // than its share of the cores (measured; 1 = a fair share).
  virtual double oversubscribed() const { return 1; }
};

// Fixed costs: every stage takes f/b/i/w per micro-batch, every message `message_s`, every
// collective `collective_s_` (or, when `network` is set, the alpha-beta cost over it).
class ConstantCostModel : public CostModel {
 public:
  explicit ConstantCostModel(int stages) : stages_(stages) {}
  int stages() const override { return stages_; }
  double compute_s(int stage, schedule::Kind kind) const override;
  double p2p_s(double bytes, int from, int to) const override;
  double collective_s(Collective op, double bytes, const std::vector<int>& group) const override;
  double boundary_bytes(int) const override { return boundary; }
  double grad_bytes(int) const override { return grads; }
  double param_bytes(int) const override { return params; }
  StageMemory memory(int) const override { return mem; }
  double optimizer_s(int) const override { return optimizer; }
  double tied_grad_bytes() const override { return tied; }
  double tied_copy_bytes() const override { return tied_copy; }
  int shared_cores() const override { return cores; }
  double loaded_slowdown(int) const override { return slowdown; }

  double f = 1, b = 2, i = 1, w = 1;
  double message_s = 0;
  double all_reduce_s = 0, reduce_scatter_s = 0, all_gather_s = 0;
  const Network* network = nullptr;
  double boundary = 1, grads = 1, params = 1;
  double optimizer = 0;
  double tied = 0;       // tied_grad_bytes
  double tied_copy = 0;  // tied_copy_bytes
  StageMemory mem;
  int cores = 0;        // > 0: ranks share this many cores
  double slowdown = 1;  // compute slowdown with every core busy

 private:
  int stages_;
};

// Everything from another model: the base of the adapters below, which change one thing.
class ForwardingCostModel : public CostModel {
 public:
  explicit ForwardingCostModel(const CostModel& inner) : m_(inner) {}
  int stages() const override { return m_.stages(); }
  double compute_s(int s, schedule::Kind k) const override { return m_.compute_s(s, k); }
  double compute_comm_s(int s, schedule::Kind k) const override { return m_.compute_comm_s(s, k); }
  double p2p_s(double bytes, int from, int to) const override { return m_.p2p_s(bytes, from, to); }
  double collective_s(Collective op, double bytes, const std::vector<int>& group) const override {
    return m_.collective_s(op, bytes, group);
  }
  double boundary_bytes(int s) const override { return m_.boundary_bytes(s); }
  double receive_s(int s) const override { return m_.receive_s(s); }
  double grad_bytes(int s) const override { return m_.grad_bytes(s); }
  double param_bytes(int s) const override { return m_.param_bytes(s); }
  double sync_bytes(int s) const override { return m_.sync_bytes(s); }
  double sync_overlap_steps() const override { return m_.sync_overlap_steps(); }
  double tied_grad_bytes() const override { return m_.tied_grad_bytes(); }
  double tied_copy_bytes() const override { return m_.tied_copy_bytes(); }
  StageMemory memory(int s) const override { return m_.memory(s); }
  double optimizer_s(int s) const override { return m_.optimizer_s(s); }
  Collective reduce_collective(DpMode m) const override { return m_.reduce_collective(m); }
  int shared_cores() const override { return m_.shared_cores(); }
  double loaded_slowdown(int s) const override { return m_.loaded_slowdown(s); }
  double oversubscribed() const override { return m_.oversubscribed(); }

 protected:
  const CostModel& m_;
};

// Same compute, communication free: the simulator runs this to separate the pipeline bubble
// from exposed communication.
class FreeCommModel : public ForwardingCostModel {
 public:
  using ForwardingCostModel::ForwardingCostModel;
  double compute_s(int s, schedule::Kind k) const override {
    return m_.compute_s(s, k) - m_.compute_comm_s(s, k);
  }
  double compute_comm_s(int, schedule::Kind) const override { return 0; }
  double p2p_s(double, int, int) const override { return 0; }
  double receive_s(int) const override { return 0; }
  double collective_s(Collective, double, const std::vector<int>&) const override { return 0; }
};

// Pipeline ranks that compute at different speeds: every compute time of a stage on pipeline
// rank r (shape.rank_of(stage): the schedule's placement) and its optimizer step are multiplied
// by speed[r]; the communication inside an action (tensor parallelism) is not. For a straggler
// ("one GPU 20% slower") or for the speeds a run measured per rank
// (bench/predict_vs_measure.sh).
class RankSpeedModel : public ForwardingCostModel {
 public:
  // speed: one factor > 0 per pipeline rank (empty: all 1); shape: which rank holds a stage.
  RankSpeedModel(const CostModel& inner, std::vector<double> speed, const schedule::Shape& shape)
      : ForwardingCostModel(inner), speed_(std::move(speed)), shape_(shape) {}
  double compute_s(int s, schedule::Kind k) const override {
    const double comm = m_.compute_comm_s(s, k);
    return (m_.compute_s(s, k) - comm) * of(s) + comm;
  }
  double optimizer_s(int s) const override { return m_.optimizer_s(s) * of(s); }

 private:
  double of(int stage) const {
    return speed_.empty() ? 1 : speed_[static_cast<size_t>(shape_.rank_of(stage))];
  }
  std::vector<double> speed_;
  schedule::Shape shape_;
};

}  // namespace loom::plan
