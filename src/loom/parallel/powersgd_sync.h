#pragma once
// --dp-mode powersgd: PowerSGD (Vogels, Karimireddy, Jaggi, "PowerSGD: Practical Low-Rank
// Gradient Compression for Distributed Optimization", NeurIPS 2019), per pipeline stage.
//
// Per step (dp = d > 1, from powersgd.start_step on), for each parameter whose gradient is a
// matrix n x m (higher-dimensional ones as [shape0, rest]) where rank r = min(rank, n, m) pays,
// r (n + m) < n m:
//   M = grad + e                e: this replica's error from the previous step
//   P = M Q, all-reduce (mean)  Q: m x r, random from a seed shared by all replicas, then
//                               (warm_start) the previous step's
//   P = orthonormal(P)          reduced QR: the same on every replica, P being the same
//   Q = M^T P, all-reduce (mean)
//   grad = P Q^T, e = M - P Q^T
// All P's of the stage travel in one flat all-reduce, all Q's in another; the other gradients
// (vectors, matrices that do not pay) in a third, started first so that it overlaps.
// Before start_step, and with d == 1: the bucketed all-reduce of --dp-mode allreduce.
// Every replica ends with the same gradient and applies the same update (not per_replica).
#include "loom/parallel/data_parallel.h"

namespace loom::parallel {

class PowerSgdSync : public DataParallel {
 public:
  // compress_all: compress every matrix, also where it does not pay (tests: full rank must
  // give the mean gradient).
  explicit PowerSgdSync(const SyncContext& ctx, bool compress_all = false);
  std::string name() const override { return "powersgd"; }
  void on_last_backward() override;
  void reduce_grad() override;
  std::vector<torch::Tensor> optimized_params() override { return stage_tensors(); }
  void finish_grad_sync() override;
  // Every replica holds the same gradient: dp rank 0 only.
  double grad_norm_sq() override { return dp_->rank() == 0 ? buffer_.grad_sq_sum() : 0.0; }
  void after_step() override;
  // The error came from non-finite gradients, and so may Q: both start afresh.
  void drop_step() override;
  MemoryBytes memory() const override;
  // e per replica ("powersgd.error/<name>"), Q ("powersgd.q/<name>", replica -1), the step
  // count and the rank. Another mode's checkpoint (or another rank): e = 0, Q fresh.
  void save(ChunkWriter& w) const override;
  void load(const ChunkReader& r) override;
  // powersgd_bytes (sent by this rank in the step), powersgd_compression (floats exchanged /
  // the stage's floats), powersgd_residual (||e|| / ||M|| over the compressed matrices).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

  // A compressed matrix: stage parameter `slot` as n x m, rank r; its P and Q in p_ and q_.
  struct Matrix {
    size_t slot = 0;
    int64_t n = 0, m = 0, r = 0, p_at = 0, q_at = 0;
  };
  const std::vector<Matrix>& matrices() const { return mats_; }
  int64_t plain_numel() const { return plain_.defined() ? plain_.numel() : 0; }
  const torch::Tensor& error() const { return e_; }

 private:
  bool compressing() const { return dp_->size() > 1 && steps_ >= cfg_.start_step; }
  void fresh_q();
  torch::Tensor matrix(const torch::Tensor& flat, const Matrix& k) const;  // n x m view
  torch::Tensor p_of(const Matrix& k) const;                               // n x r view of p_
  torch::Tensor q_of(const Matrix& k) const;                               // m x r view of q_
  void count(const comm::Stats& before) { bytes_ += double((dp_->stats() - before).total_bytes()); }

  config::PowerSgdConfig cfg_;
  uint64_t seed_ = 0;
  std::vector<Matrix> mats_;
  std::vector<size_t> plain_slots_;  // gradients sent whole
  torch::Tensor e_;                  // flat as the gradients; zero outside mats_
  torch::Tensor p_, q_, plain_;      // flat
  comm::WorkPtr plain_work_, p_work_;
  comm::Stats buckets_from_;  // before start_step: the counters when the backward began
  bool started_ = false;
  int64_t steps_ = 0;
  double bytes_ = 0, residual_ = 0, ratio_ = 1;
};

}  // namespace loom::parallel
