#include "loom/parallel/slim_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "loom/common/error.h"
#include "loom/parallel/slim_select.h"

namespace loom::parallel {
namespace {

// u <- kDecay u + (1 - kDecay) merged update: an average over roughly the last 10 merges of a
// coordinate, the same horizon as the default core refresh (R = 10 syncs).
constexpr float kDecay = 0.9f;

torch::Tensor vector_tensor(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kFloat32)
      .clone();
}

void tensor_vector(const torch::Tensor& t, std::vector<float>& v, const char* what) {
  LOOM_CHECK_EQ(t.numel(), static_cast<int64_t>(v.size()), "checkpoint ", what,
                " has the wrong size");
  auto c = t.to(torch::kFloat32).contiguous();
  std::memcpy(v.data(), c.data_ptr<float>(), v.size() * sizeof(float));
}

// sqrt(num / den): the drift ||w_r - g|| / ||g|| from its squared terms.
double ratio(double num, double den) {
  return den > 0 ? std::sqrt(std::max(0.0, num) / den) : 0.0;
}

}  // namespace

SlimSync::SlimSync(const SyncContext& ctx)
    : DataParallel(ctx, BufferOptions{}), cfg_(ctx.cfg->slim), seed_(ctx.cfg->train.seed) {
  n_ = buffer_.layout().numel;
  u_.assign(n_, 0.0f);
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
  measure_drift();
  drift_pre_ = ratio(num_, den_);
  if (n_ > 0 && steps_ % cfg_.period == 0) sync();  // updates num_ and den_ on S
  drift_ = ratio(num_, den_);
  work_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

void SlimSync::refresh_core() {
  auto score = slim::significance(g_.data(), u_.data(), n_, cfg_.lambda);
  core_ = slim::top_k(score, slim::fraction_count(cfg_.core, n_));
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

// Key names avoid Python keywords ("global"): torch archives are TorchScript modules.
void SlimSync::save(torch::serialize::OutputArchive& ar) const {
  ar.write("global_params", vector_tensor(g_));
  ar.write("merged_update", vector_tensor(u_));
  ar.write("core_set", torch::tensor(core_, torch::kInt64));
  ar.write("counters", torch::tensor(std::vector<int64_t>{steps_, round_}, torch::kInt64));
}

void SlimSync::load(torch::serialize::InputArchive& ar) {
  // A fresh tensor per read: InputArchive::read() into a defined tensor calls set_() on it,
  // which would reinterpret the next key's data in the previous key's dtype.
  auto read = [&](const char* key) {
    torch::Tensor t;
    ar.read(key, t);
    return t;
  };
  tensor_vector(read("global_params"), g_, "global_params");
  tensor_vector(read("merged_update"), u_, "merged_update");
  torch::Tensor core = read("core_set").to(torch::kInt64).contiguous();
  core_.assign(core.data_ptr<int64_t>(), core.data_ptr<int64_t>() + core.numel());
  for (int64_t i : core_)
    LOOM_CHECK(i >= 0 && i < n_, "checkpoint core set holds index ", i, " outside [0, ", n_, ")");
  pool_ = slim::complement(core_, n_);
  mask_.assign(n_, 0);
  for (int64_t i : core_) mask_[i] = 1;
  torch::Tensor counters = read("counters");
  steps_ = counters[0].item<int64_t>();
  round_ = counters[1].item<int64_t>();
}

}  // namespace loom::parallel
