#include "loom/parallel/slim_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "loom/common/error.h"
#include "loom/parallel/slim_select.h"

namespace loom::parallel {
namespace {

// u <- kDecay u + (1 - kDecay) merged update: an average over roughly the last 10 merges of a
// coordinate, the same horizon as the default core refresh (R = 10 syncs).
constexpr float kDecay = 0.9f;

// sqrt(num / den): the drift ||w_r - g|| / ||g|| from its squared terms.
double ratio(double num, double den) {
  return den > 0 ? std::sqrt(std::max(0.0, num) / den) : 0.0;
}

}  // namespace

SlimSync::SlimSync(const SyncContext& ctx)
    : DataParallel(ctx, BufferOptions{}), cfg_(ctx.cfg->slim), seed_(ctx.cfg->train.seed) {
  n_ = buffer_.layout().numel;
  w_ = HostMirror(buffer_.params());
  w_.pull();
  u_.assign(n_, 0.0f);
  const auto& named = stage_->params();
  for (size_t p = 0; p < named.size(); ++p)
    if (named[p].tp_part < 0 && named[p].tp_parts > 1)
      for (int64_t i = 0; i < buffer_.layout().slots[p].numel; ++i)
        replicated_.push_back(buffer_.layout().slots[p].offset + i);
  g_.assign(local(), local() + n_);  // every rank built the same initial parameters (same seed)
}

void SlimSync::measure_drift() {
  const float* w = local();
  num_ = 0;
  den_ = 0;
  for (int64_t i = 0; i < n_; ++i) {
    double d = double(w[i]) - double(g_[i]);
    num_ += d * d;
    den_ += double(g_[i]) * g_[i];
  }
}

double SlimSync::grad_norm_sq() {
  return buffer_.grad_sq_sum() / dp_->size();
}

void SlimSync::before_step() {
  step_start_ = std::chrono::steady_clock::now();
  wait_s_ = 0;
}

void SlimSync::after_step() {
  buffer_.zero_grads();  // the trainer's optimizer has made the local update
  ++steps_;
  bytes_ = 0;
  fraction_ = 0;
  w_.pull();
  measure_drift();
  drift_pre_ = ratio(num_, den_);
  if (n_ > 0 && steps_ % cfg_.period == 0) {
    sync();  // updates num_ and den_ on S
    w_.push();
  }
  drift_ = ratio(num_, den_);
  work_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

void SlimSync::refresh_core() {
  auto score = slim::significance(g_.data(), u_.data(), n_, cfg_.lambda);
  // Tensor parallelism: the copies of a replicated parameter on the ranks of a group must stay
  // equal, so every rank syncs all of its coordinates (the rest of a core, chosen by scores
  // that differ between the ranks' parts, could not agree on them).
  for (int64_t i : replicated_) score[i] = std::numeric_limits<float>::infinity();
  core_ = slim::top_k(score, std::max(slim::fraction_count(cfg_.core, n_),
                                      static_cast<int64_t>(replicated_.size())));
  pool_ = slim::complement(core_, n_);
  mask_.assign(n_, 0);
  for (int64_t i : core_) mask_[i] = 1;
}

void SlimSync::sync() {
  // Both schedules count syncs (rounds), not steps, so tau does not change them.
  if (round_ % cfg_.refresh == 0) refresh_core();
  const bool full = cfg_.full_sync > 0 && (round_ + 1) % cfg_.full_sync == 0;
  if (full) {
    selected_.resize(n_);
    std::iota(selected_.begin(), selected_.end(), 0);
  } else {
    // With c + e = 1 the two ceilings can exceed n by one: the explorer takes what is left.
    int64_t m = std::min<int64_t>(slim::fraction_count(cfg_.explore, n_),
                                  static_cast<int64_t>(pool_.size()));
    slim::draw_into(pool_, m, slim::explorer_seed(seed_, stage_->index(), round_), explorer_,
                    swaps_);
    for (int64_t i : explorer_) mask_[i] = 1;
    slim::indices_of(mask_, selected_);  // C u E, ascending
    for (int64_t i : explorer_) mask_[i] = 0;
  }
  const auto k = static_cast<int64_t>(selected_.size());
  const int64_t* s = selected_.data();
  float* w = local();
  buf_.resize(k);
  for (int64_t j = 0; j < k; ++j) buf_[j] = w[s[j]] - g_[s[j]];  // push: local drift
  const int d = dp_->size();
  if (d > 1 && k > 0) {
    auto before = dp_->stats();
    auto work = dp_->all_reduce(buf_.data(), k, comm::DType::Float32);
    bytes_ = double((dp_->stats() - before).total_bytes());
    work->wait();
    exposed_s_ += work->waited_s();
    wait_s_ = work->waited_s();
  }
  // Pull. Every rank applies the same all-reduced sums in the same order: g stays identical.
  const float inv = 1.0f / static_cast<float>(d);
  double num_s = 0, den_old = 0, den_new = 0;  // the drift terms of S, before and after
  for (int64_t j = 0; j < k; ++j) {
    const int64_t i = s[j];
    const double before = double(w[i]) - double(g_[i]);
    num_s += before * before;
    den_old += double(g_[i]) * g_[i];
    const float mean = buf_[j] * inv;
    g_[i] += mean;
    w[i] = g_[i];
    u_[i] = kDecay * u_[i] + (1.0f - kDecay) * mean;
    den_new += double(g_[i]) * g_[i];
  }
  // Outside S nothing changed: update the sums instead of another pass over n.
  num_ = k == n_ ? 0.0 : num_ - num_s;
  den_ = k == n_ ? den_new : den_ - den_old + den_new;
  fraction_ = double(k) / double(n_);
  ++round_;
}

std::vector<std::pair<std::string, double>> SlimSync::step_metrics() const {
  return {{"slim_bytes", bytes_}, {"slim_sync_fraction", fraction_}, {"slim_drift_pre", drift_pre_},
          {"slim_drift", drift_}, {"slim_step_s", work_s_},          {"slim_wait_s", wait_s_}};
}

MemoryBytes SlimSync::memory() const {
  MemoryBytes m = buffer_.memory();  // local w_r and its gradient
  m.params += n_ * 4;                // global copy g
  m.optimizer = n_ * 4;  // running merged update u (the optimizer's own state: the trainer)
  m.optimizer += static_cast<int64_t>(core_.size() + pool_.size() + selected_.size()) * 8 +
                 static_cast<int64_t>(mask_.size()) +
                 static_cast<int64_t>(buf_.size()) * 4;  // index sets, mask, exchange buffer
  return m;
}

void SlimSync::save(ChunkWriter& w) const {
  put_flat(w, "slim.global", -1, g_.data());
  put_flat(w, "slim.update", -1, u_.data());
  std::vector<float> core(n_, 0.0f);
  for (int64_t i : core_) core[i] = 1.0f;
  put_flat(w, "slim.core", -1, core.data());
  w.put("slim.counters", -1, 0, {2}, torch::tensor(std::vector<int64_t>{steps_, round_}));
}

void SlimSync::load(const ChunkReader& r) {
  fresh_global_ = !get_flat(r, "slim.global", -1, g_.data());
  if (fresh_global_) return;  // another mode's checkpoint: after_load() starts slim afresh
  if (!get_flat(r, "slim.update", -1, u_.data()))
    LOOM_USAGE("checkpoint holds slim.global but not slim.update; it is incomplete");
  std::vector<float> core(n_, 0.0f);
  if (!get_flat(r, "slim.core", -1, core.data()))
    LOOM_USAGE("checkpoint holds slim.global but not slim.core; it is incomplete");
  core_.clear();
  for (int64_t i = 0; i < n_; ++i)
    if (core[i] != 0.0f) core_.push_back(i);
  pool_ = slim::complement(core_, n_);
  mask_.assign(n_, 0);
  for (int64_t i : core_) mask_[i] = 1;
  torch::Tensor counters = torch::zeros({2}, torch::kInt64);
  if (!r.get("slim.counters", -1, 0, counters))
    LOOM_USAGE("checkpoint holds slim.global but not slim.counters; it is incomplete");
  steps_ = counters[0].item<int64_t>();
  round_ = counters[1].item<int64_t>();
}

void SlimSync::after_load() {
  w_.pull();
  if (fresh_global_) g_.assign(local(), local() + n_);  // u_ = 0, counters 0: a new start
}

}  // namespace loom::parallel
