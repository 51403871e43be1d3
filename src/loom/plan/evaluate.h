#pragma once
// One configuration end to end: generate the schedule, validate and lower it as the runtime
// does (schedule/), build the TransformerCostModel and simulate. Used by `loom simulate`,
// the planner and the tests.
#include <string>
#include <vector>

#include "loom/plan/cluster.h"
#include "loom/plan/parallel.h"
#include "loom/plan/simulator.h"
#include "loom/plan/transformer.h"
#include "loom/schedule/schedule.h"

namespace loom::plan {

struct EvalOptions {
  std::string precision;  // "" = the cluster's
  std::vector<int> cut;   // "" = uniform
  // Compute-time multiplier per pipeline rank (RankSpeedModel); empty = all 1.
  std::vector<double> rank_speed;
  bool timeline = false;
  bool blocking_p2p = false;  // SimOptions::blocking_p2p, messages placed by blocking_exchanges
  bool grad_reduce_after_flush = false;  // SimOptions::grad_reduce_after_flush
  bool async_save = false;  // output.async_save: SimOptions::async_save, by the cluster's kind
};

struct Evaluation {
  Parallel par;
  schedule::Schedule lowered;
  SimResult sim;
  // Narayanan's FLOPs of one step: counts the recomputed forward when recomputing (the
  // convention of Megatron-LM's published TFLOP/s). Model FLOPs never count it (72 form), so
  // model_tflops_per_gpu is proportional to samples/s: compare configurations with it.
  double step_flops = 0;
  double tflops_per_gpu = 0;        // step_flops / step / gpus / 1e12
  double mfu = 0;                   // tflops_per_gpu of the cluster's peak
  double model_tflops_per_gpu = 0;  // without recomputation
  double model_mfu = 0;
  double memory_limit = 0;  // bytes per device
  std::string compute_source;
  int shared_cores = 0;        // > 0: the ranks share this many cores
  double loaded_slowdown = 1;  // the largest stage slowdown with every core computing
  double oversubscribed = 1;   // ranks outnumbering the cores: beyond their fair share of them
  double runtime_cpu = 1;      // the part of `oversubscribed` that is the runtime's own CPU
  // The peak of every rank within the device's memory.
  bool fits() const { return sim.peak_memory() <= memory_limit; }
  double samples_per_s() const { return sim.step_s > 0 ? par.global_batch() / sim.step_s : 0; }
};

// Throws loom::UsageError for a schedule that does not support the shape, a bad cut, etc.
Evaluation evaluate(const Transformer& m, const Parallel& p, const Cluster& c,
                    const EvalOptions& o = {});

// Multi-line breakdown for `loom simulate`.
std::string format_breakdown(const Evaluation& e);

// "1.5 GB", "12.3 ms"
std::string human_bytes(double bytes);
std::string human_seconds(double s);

}  // namespace loom::plan
