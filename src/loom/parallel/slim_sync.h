#pragma once
// --dp-mode slim: Slim-DP (Sun et al., AAMAS 2018) as docs/slim-dp.md reads it; that page also
// gives every choice made on top of the paper.
//
// Per stage, the parameters are n values. Each rank trains its own parameters w_r (the stage's
// tensors) with its own optimizer on its own gradients: no gradient is exchanged, so
// REDUCE_GRAD and finish() do nothing. Each rank also keeps a copy g of the global parameters,
// bit for bit the same on every rank. Every tau local steps (slim.period) the ranks synchronize a
// subset S = C u E of the coordinates:
//   core C      ceil(c n) most significant coordinates by s_i = |g_i| (1 + lambda |u_i| / mean|u|),
//               recomputed every R syncs (slim.refresh) from g and u, which every rank holds;
//   explorer E  ceil(e n) coordinates drawn uniformly from the rest, seeded by (seed, stage,
//               sync round): the same on every rank, so no index ever travels;
//   push        delta_r = w_r[S] - g[S]; one dense all-reduce of |S| floats gives the mean;
//   pull        g[S] += mean delta; w_r[S] = g[S].
// u is an exponential running average (decay 0.9) of the merged updates, updated on the
// coordinates of each sync. Every F syncs (slim.full_sync > 0) S is every coordinate.
//
// Order within the step: the trainer's local optimizer update first, then the sync (after_step).
// The push then carries this step's update, so with c + e = 1, tau = 1 and plain SGD one step
// is exactly w <- w - lr * mean_r(grad_r), the all-reduce step (tested). Syncing before the
// update would leave every local update one step behind the global copy.
//
// w_r is the stage's flat parameter buffer (param_buffer.h): the sync reads and writes the
// parameters in place, with no copy of its own.
#include <chrono>

#include "loom/parallel/data_parallel.h"
#include "loom/parallel/host_mirror.h"

namespace loom::parallel {

class SlimSync : public DataParallel {
 public:
  explicit SlimSync(const SyncContext& ctx);
  std::string name() const override { return "slim"; }
  // Local parameters, local gradients: no gradient exchange.
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override {}
  // This rank's squared local gradient norm divided by dp: the trainer's world-wide sum is then
  // the mean over replicas of each replica's squared local norm, and every replica clips its
  // local gradient with the same factor (clipping acts on local gradients in slim).
  double grad_norm_sq() override;
  void before_step() override;  // starts the step's clock (slim_step_s)
  void after_step() override;   // the sync
  MemoryBytes memory() const override;
  // Each replica trains its own parameters w_r (and optimizer state).
  bool per_replica() const override { return true; }
  // g, u and the core as chunks of the parameters, and the counters. From a checkpoint of
  // another mode (no slim state): g = the loaded parameters, u = 0, the core chosen afresh.
  void save(ChunkWriter& w) const override;
  void load(const ChunkReader& r) override;
  void after_load() override;
  // slim_bytes (sent by this rank in this step), slim_sync_fraction (|S| / n, 0 without a
  // sync), slim_drift_pre / slim_drift (||w_r - g|| / ||g|| before and after the sync, this rank),
  // slim_step_s (seconds from before_step() to the end of after_step(), optimizer included) and
  // slim_wait_s (of which blocked on the all-reduce).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

  // Inspection (tests).
  int64_t numel() const { return n_; }
  int64_t rounds() const { return round_; }
  const std::vector<int64_t>& core() const { return core_; }
  const std::vector<int64_t>& last_selected() const { return selected_; }
  const std::vector<float>& global_params() const { return g_; }

 private:
  void sync();
  void refresh_core();
  void measure_drift();                       // num_, den_ from w and g_
  float* local() const { return w_.data(); }  // w_r on the host (pulled)

  config::SlimConfig cfg_;
  uint64_t seed_;
  int64_t n_ = 0;
  HostMirror w_;  // of the local parameters
  std::vector<float> g_, u_;
  std::vector<int64_t> core_, pool_, selected_;  // pool_: coordinates outside the core
  std::vector<int64_t> replicated_;        // of parameters replicated on a tensor-parallel group
  std::vector<uint8_t> mask_;              // 1 on the core (S is built by one scan)
  std::vector<int64_t> explorer_, swaps_;  // reused every sync: no allocation
  std::vector<float> buf_;
  double num_ = 0, den_ = 0;  // ||w_r - g||^2 and ||g||^2 (drift)
  int64_t steps_ = 0, round_ = 0;
  // Last step's report.
  double bytes_ = 0, fraction_ = 0, drift_pre_ = 0, drift_ = 0, work_s_ = 0, wait_s_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  bool fresh_global_ = false;  // load() found no slim state: g from the loaded parameters
};

}  // namespace loom::parallel
