#pragma once
// The planner (`loom plan`): which dp x pp x tp, micro-batch size, micro-batch count, loops,
// schedule, data-parallel mode and recomputation to use for a model on N devices and a global
// batch.
//  1. Enumerate: tp divides N, at most a node and divides heads and width; pp divides N / tp
//     with pp <= layers; dp = N / (tp pp) divides the global batch; micro-batch size b divides
//     the replica's batch (m = batch / (dp b)); loops v with pp v <= layers (v > 1 only when
//     pp v divides layers); every generator that supports the shape (skipping duplicates:
//     interleaved with v = 1 is 1f1b, gpipe with v > 1 is bfs); every dp-mode (dp > 1);
//     recomputation none, selective and full; the attention kernels, tensor-parallel
//     overlap and distributed optimizer asked for; sequence parallelism whenever tp > 1.
//  2. A cheap bound per candidate (closed-form bubble times the slowest stage, static memory
//     plus one micro-batch of activations): candidates whose bound exceeds the memory are
//     dropped, the rest are simulated best bound first until the time budget runs out.
//  3. Simulated candidates over the memory limit are dropped; the rest are ranked by step
//     time (then memory). The explanation compares the winner with the runner-up.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/plan/cluster.h"
#include "loom/plan/evaluate.h"
#include "loom/plan/transformer.h"

namespace loom::plan {

// Default share of device memory the planner may fill: the rest is headroom for the allocator's
// fragmentation, the communication library's buffers and the runtime itself.
constexpr double kDefaultMemoryShare = 0.9;

struct PlanRequest {
  Transformer model;
  int gpus = 1;
  int64_t global_batch = 1;
  std::string precision;               // "" = the cluster's
  std::vector<std::string> schedules;  // empty = every generator
  std::vector<DpMode> dp_modes;        // empty = all four
  std::vector<int64_t> micro_batches;  // empty = 1, 2, 4, 8 (those that divide)
  std::vector<int> loops;              // empty = 1, 2, 4, 8
  std::vector<Recompute> recompute = {Recompute::None, Recompute::Selective, Recompute::Full};
  std::vector<Attention> attention = {Attention::Standard};
  std::vector<bool> tp_comm_overlap = {false};        // true: only where tp > 1
  std::vector<bool> distributed_optimizer = {false};  // true: only for zero1 with dp > 1
  bool megatron = false;                              // Parallel::megatron
  bool async_save = false;                            // EvalOptions::async_save
  int max_microbatches = 1024;                        // m above this is skipped (simulation cost)
  double memory_limit = 0;  // bytes per device; 0 = kDefaultMemoryShare of the cluster's
  double time_budget_s = 30;
};

struct Candidate {
  Parallel par;
  double step_s = 0, ideal_step_s = 0, bubble = 0, exposed_s = 0;
  // Busiest rank's compute, without its tensor-parallel communication (that is exposed
  // communication: exposed_s counts it), so that compute, bubble and exposed add up to the step.
  double compute_s = 0;
  double tp_comm_s = 0, p2p_s = 0, dp_s = 0, optimizer_s = 0;
  double peak_bytes = 0;
  MemoryBreakdown peak;
  double tflops_per_gpu = 0, mfu = 0;  // counting recomputation (evaluate.h)
  double model_tflops_per_gpu = 0, model_mfu = 0;
  double bound_s = 0;  // the cheap estimate that ordered the search
};

struct PlanResult {
  std::vector<Candidate> ranked;  // under the memory limit, fastest first
  double memory_limit = 0;
  int enumerated = 0;     // configurations built
  int dropped_bound = 0;  // over memory by the cheap bound
  int simulated = 0;
  int over_memory = 0;     // simulated, over the limit
  int skipped_budget = 0;  // not simulated: time budget
  double elapsed_s = 0;
  std::string explanation;
};

PlanResult plan(const PlanRequest& req, const Cluster& c);
Candidate summarize(const Evaluation& e);
// One paragraph comparing the winner with the runner-up, from the numbers.
std::string explain(const PlanResult& r);
// Ranked table of the first `top` candidates.
std::string format_table(const PlanResult& r, int top);

}  // namespace loom::plan
