#pragma once
// Helpers of the multi-rank tests of the data-parallel modes: tiny configurations, runs on the
// first k ranks of the world, and parameter comparisons maximized over ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "../support/shared_tmp.h"
#include "../support/tiny_config.h"
#include "loom/comm/world.h"
#include "loom/model/model.h"
#include "loom/model/tensor_parallel.h"
#include "loom/parallel/stage.h"
#include "loom/train/trainer.h"

namespace loom::test {

// Plain SGD (no momentum, constant learning rate, no clipping) on synthetic data.
inline config::Config tiny(const std::string& kind) {
  config::Config c = tiny_config(kind);
  c.train.optimizer = config::Optimizer::Sgd;
  c.train.momentum = 0;
  c.train.lr = 0.05;
  c.train.lr_schedule = config::LrSchedule::Constant;
  return c;
}

using Params = std::map<std::string, torch::Tensor>;

// Trains `c` on the first `ranks` ranks of the world (stopping after `stop_after` steps, as
// a preempted run, if >= 0); the others return an empty map.
inline Params train_on(config::Config c, int ranks, const std::string& tag,
                       int64_t stop_after = -1) {
  comm::Backend& w = comm::world();
  c.output.dir = shared_tmp(tag);  // every rank: the first call is a collective on the world
  bool in = w.rank() < ranks;
  auto sub = w.split(in ? 0 : 1, w.rank(), "train");
  if (!in) return {};
  return train::Trainer(c, *sub).run(stop_after).params;
}

// The largest difference between this rank's tensors and rank 0's, over the world.
inline double spread_over_replicas(const Params& mine) {
  double spread = 0;
  for (const auto& [name, t] : mine) {
    torch::Tensor first = t.contiguous().clone();
    comm::world().broadcast(first, 0)->wait();
    spread = std::max(spread, (t - first).abs().max().item<double>());
  }
  comm::world().all_reduce(&spread, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return spread;
}

// Trains `c` and then, for reference, the same run under --dp-mode allreduce (tag + "-ref"), on
// the first `ranks` ranks; returns both (empty maps on the other ranks).
inline std::pair<Params, Params> train_and_allreduce(config::Config c, int ranks,
                                                     const std::string& tag) {
  auto got = train_on(c, ranks, tag);
  c.parallel.dp_mode = config::DpMode::AllReduce;
  return {std::move(got), train_on(c, ranks, tag + "-ref")};
}

// Trains `c` as it is on this rank alone (in `dir` + the rank), once per process and
// configuration: a sweep's cases share a few single-process references (the layout is not
// part of one), kept under the whole configuration but its folder; each call gets copies.
// Every rank calls it.
inline Params trained_alone(config::Config c, const std::string& dir) {
  static std::map<std::string, Params> trained;
  c.output.dir.clear();
  const std::string key = config::to_toml(c);
  auto it = trained.find(key);
  if (it == trained.end()) {
    comm::Backend& w = comm::world();
    auto self = w.split(w.rank(), 0, "self");
    c.output.dir = dir + std::to_string(w.rank());
    it = trained.emplace(key, train::Trainer(c, *self).run().params).first;
  }
  Params copy;
  for (const auto& [name, t] : it->second) copy[name] = t.clone();
  return copy;
}

// Trains `c` in one process (the world's rank r alone, in its own folder), with
// `microbatches` micro-batches per step: a pipeline run's reference when it runs the same
// micro-batches (so every product has the shape it has in the pipeline).
inline Params single_process(config::Config c, const std::string& dir, int64_t microbatches) {
  set_layout(c, 1, 1, 1, 1, "1f1b", "allreduce", microbatches);
  return trained_alone(c, dir);
}

// The parameters every run starts from (same seed on every rank), by global name.
inline Params initial_params(const config::Config& c) {
  auto m = model::build(c.model, c.train.seed);
  parallel::Stage st(0, 1, m.blocks, 0);
  Params p;
  for (auto& np : st.params()) p[np.name] = np.tensor.detach().clone();
  return p;
}

// max over this rank's tensors of ||a - b|| / ||b||, then max over the world.
inline double max_relative_diff(const Params& a, const Params& b) {
  double diff = 0;
  for (auto& [name, t] : a) {
    auto it = b.find(name);
    EXPECT_NE(it, b.end()) << name;
    if (it == b.end()) continue;
    diff = std::max(diff, (t - it->second).norm().item<double>() /
                              std::max(1e-12, it->second.norm().item<double>()));
  }
  comm::world().all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return diff;
}

// max_relative_diff of this rank's tensors to its tensor-parallel parts of `whole` (single-
// process parameters), the tp rank being the world rank modulo `tp` (the tests' meshes).
inline double max_relative_diff_tp(const Params& got, const Params& whole, int tp) {
  const int part = comm::world().rank() % tp;
  double diff = 0;
  for (const auto& [name, t] : got) {
    const torch::Tensor want = model::tp_shard(name, whole.at(name), part, tp);
    EXPECT_EQ(t.sizes(), want.sizes()) << name;
    if (t.sizes() != want.sizes()) return INFINITY;
    diff = std::max(diff, (t - want).norm().item<double>() / want.norm().item<double>());
  }
  comm::world().all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return diff;
}

// max over tensors of ||a - b|| / ||b - start||: the difference relative to the update.
inline double max_update_diff(const Params& a, const Params& b, const Params& start) {
  double diff = 0;
  for (auto& [name, t] : a) {
    auto& ref = b.at(name);
    double upd = (ref - start.at(name)).norm().item<double>();
    if (upd < 1e-12) continue;
    diff = std::max(diff, (t - ref).norm().item<double>() / upd);
  }
  comm::world().all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return diff;
}

// Trains `c` (which must set steps and checkpoint_every) straight through and, separately,
// stops after `stop_after` steps and resumes from that checkpoint, on the first `ranks` ranks;
// expects bit-identical parameters.
inline void expect_resume_exact(config::Config c, int ranks, const std::string& tag,
                                int64_t stop_after) {
  auto straight = train_on(c, ranks, tag + "-straight");
  const std::string dir = shared_tmp(tag + "-split");
  {
    const bool in = comm::world().rank() < ranks;
    auto sub = comm::world().split(in ? 0 : 1, comm::world().rank(), "resume");
    if (in) {
      config::Config first = c;
      first.output.dir = dir;
      EXPECT_EQ(train::Trainer(first, *sub).run(stop_after).steps, stop_after);
    }
  }
  c.output.resume = dir + "/checkpoint";
  auto resumed = train_on(c, ranks, tag + "-resumed");
  for (auto& [name, t] : straight)
    EXPECT_TRUE(torch::equal(t, resumed.at(name)))
        << name << " max difference " << (t - resumed.at(name)).abs().max().item<float>();
}

// Six steps of SGD with momentum (state the checkpoint must carry) from `c`, a checkpoint after
// the third; on the first two ranks, the run interrupted there and resumed must end bit for bit
// where the straight run does.
inline void expect_resume_exact_after_3_of_6(config::Config c, const std::string& tag) {
  c.train.momentum = 0.9;
  c.train.steps = 6;
  c.output.checkpoint_every = 3;
  expect_resume_exact(c, std::min(2, comm::world().size()), tag, /*stop_after=*/3);
}

// min and max of a value over the world (a value is identical on all ranks when they agree).
inline std::pair<uint64_t, uint64_t> world_min_max(uint64_t v) {
  auto lo = static_cast<int64_t>(v >> 1), hi = lo;  // int64 collectives: drop one bit
  comm::world().all_reduce(&lo, 1, comm::DType::Int64, comm::ReduceOp::Min)->wait();
  comm::world().all_reduce(&hi, 1, comm::DType::Int64, comm::ReduceOp::Max)->wait();
  return {static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)};
}

}  // namespace loom::test
