#include "loom/parallel/powersgd_sync.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "loom/common/error.h"
#include "loom/parallel/allreduce_sync.h"

namespace loom::parallel {

// The allreduce mode's buckets: before start_step the step is allreduce's, bit for bit
// (grad_reduce bf16 is refused for powersgd, so the buffer is fp32 as allreduce's is then).
PowerSgdSync::PowerSgdSync(const SyncContext& ctx, bool compress_all)
    : DataParallel(ctx, allreduce_buffer_options(*ctx.cfg)), cfg_(ctx.cfg->powersgd) {
  LOOM_CHECK(cfg_.rank >= 1, "powersgd.rank must be at least 1");
  seed_ = ctx.cfg->train.seed * 1000003ULL + static_cast<uint64_t>(stage_->index());
  const FlatLayout& l = buffer_.layout();
  int64_t p_len = 0, q_len = 0, plain_len = 0;
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const auto& s = l.slots[i];
    const int64_t n = s.shape.size() >= 2 ? s.shape[0] : 0;
    const int64_t m = n > 0 ? s.numel / n : 0;
    const int64_t r = std::min({cfg_.rank, n, m});
    if (r > 0 && (compress_all || r * (n + m) < n * m)) {
      mats_.push_back({i, n, m, r, p_len, q_len});
      p_len += n * r;
      q_len += m * r;
    } else {
      plain_slots_.push_back(i);
      plain_len += s.numel;
    }
  }
  if (l.numel > 0) ratio_ = double(p_len + q_len + plain_len) / double(l.numel);
  if (dp_->size() == 1) return;
  const auto opt = buffer_.grads().options();
  e_ = torch::zeros({l.padded}, opt);
  p_ = torch::zeros({p_len}, opt);
  q_ = torch::zeros({q_len}, opt);
  if (plain_len > 0) plain_ = torch::zeros({plain_len}, opt);
  fresh_q();
}

torch::Tensor PowerSgdSync::p_of(const Matrix& k) const {
  return p_.narrow(0, k.p_at, k.n * k.r).view({k.n, k.r});
}

torch::Tensor PowerSgdSync::q_of(const Matrix& k) const {
  return q_.narrow(0, k.q_at, k.m * k.r).view({k.m, k.r});
}

torch::Tensor PowerSgdSync::matrix(const torch::Tensor& flat, const Matrix& k) const {
  const auto& s = buffer_.layout().slots[k.slot];
  return flat.narrow(0, s.offset, s.numel).view({k.n, k.m});
}

// Drawn on the CPU from a seed every replica shares, so every replica's Q is the same on any
// device. Without warm start each step draws its own.
void PowerSgdSync::fresh_q() {
  if (!q_.defined() || q_.numel() == 0) return;
  const uint64_t salt = cfg_.warm_start ? 0 : static_cast<uint64_t>(steps_ + 1);
  auto gen = at::detail::createCPUGenerator(seed_ ^ (salt * 0x9E3779B97F4A7C15ULL));
  q_.copy_(torch::randn({q_.numel()}, gen, torch::kFloat32));
}

void PowerSgdSync::on_last_backward() {
  if (compressing()) return;
  buckets_from_ = dp_->stats();  // the buckets start from the backward's hooks
  buffer_.arm();
}

void PowerSgdSync::reduce_grad() {
  if (!compressing()) {
    buffer_.start_grad_sync();
    return;
  }
  if (started_) return;
  started_ = true;
  torch::NoGradGuard no_grad;
  bytes_ = 0;
  const torch::Tensor& g = buffer_.grads();
  const FlatLayout& l = buffer_.layout();
  if (plain_.defined()) {  // first, so that it travels while the P's are computed
    int64_t at = 0;
    for (size_t i : plain_slots_) {
      plain_.narrow(0, at, l.slots[i].numel)
          .copy_(g.narrow(0, l.slots[i].offset, l.slots[i].numel));
      at += l.slots[i].numel;
    }
    const comm::Stats before = dp_->stats();
    plain_work_ = dp_->all_reduce(plain_);
    count(before);
  }
  if (mats_.empty()) return;
  if (!cfg_.warm_start) fresh_q();
  // e_ holds M = grad + e until finish_grad_sync() (zero outside the matrices).
  for (const Matrix& k : mats_) {
    torch::Tensor m = matrix(e_, k);
    m.add_(matrix(g, k));
    torch::Tensor p = p_of(k);
    torch::mm_out(p, m, q_of(k));
  }
  const comm::Stats before = dp_->stats();
  p_work_ = dp_->all_reduce(p_);
  count(before);
}

void PowerSgdSync::finish_grad_sync() {
  if (!compressing()) {
    buffer_.finish_grad_sync();
    bytes_ = 0;
    count(buckets_from_);
    return;
  }
  LOOM_CHECK(started_, "finish_grad_sync() before reduce_grad() on stage ", stage_->index());
  started_ = false;
  torch::NoGradGuard no_grad;
  const double inv = 1.0 / dp_->size();
  const torch::Tensor& g = buffer_.grads();
  if (!mats_.empty()) {
    const double mm = e_.square().sum().item<double>();  // ||M||^2: e_ is M on the matrices
    p_work_->wait();
    exposed_s_ += p_work_->waited_s();
    p_work_.reset();
    p_.mul_(inv);
    for (const Matrix& k : mats_) {
      torch::Tensor p = p_of(k), q = q_of(k);
      // Householder QR: deterministic, and no division by zero for a rank-deficient P.
      p.copy_(std::get<0>(torch::linalg_qr(p, "reduced")));
      torch::mm_out(q, matrix(e_, k).t(), p);
    }
    const comm::Stats before = dp_->stats();
    comm::WorkPtr q_work = dp_->all_reduce(q_);
    count(before);
    q_work->wait();
    exposed_s_ += q_work->waited_s();
    q_.mul_(inv);
    for (const Matrix& k : mats_) {
      torch::Tensor grad = matrix(g, k);
      torch::mm_out(grad, p_of(k), q_of(k).t());
      matrix(e_, k).sub_(grad);
    }
    const double ee = e_.square().sum().item<double>();
    residual_ = mm > 0 ? std::sqrt(ee / mm) : 0.0;
  }
  if (plain_work_) {
    plain_work_->wait();
    exposed_s_ += plain_work_->waited_s();
    plain_work_.reset();
    plain_.mul_(inv);
    const FlatLayout& l = buffer_.layout();
    int64_t at = 0;
    for (size_t i : plain_slots_) {
      g.narrow(0, l.slots[i].offset, l.slots[i].numel)
          .copy_(plain_.narrow(0, at, l.slots[i].numel));
      at += l.slots[i].numel;
    }
  }
}

void PowerSgdSync::after_step() {
  buffer_.zero_grads();
  ++steps_;
}

void PowerSgdSync::drop_step() {
  if (e_.defined()) e_.zero_();
  fresh_q();
}

std::vector<std::pair<std::string, double>> PowerSgdSync::step_metrics() const {
  const bool compressed = dp_->size() > 1 && steps_ - 1 >= cfg_.start_step;  // after_step ran
  return {{"powersgd_bytes", bytes_},
          {"powersgd_compression", compressed ? ratio_ : 1.0},
          {"powersgd_residual", compressed ? residual_ : 0.0}};
}

MemoryBytes PowerSgdSync::memory() const {
  MemoryBytes m = buffer_.memory();  // parameters, gradients (and bucket bookkeeping)
  const auto bytes = [](const torch::Tensor& t) { return t.defined() ? t.numel() * 4 : 0; };
  m.grads += bytes(p_) + bytes(q_) + bytes(plain_);
  m.optimizer = bytes(e_);  // the error, state as quant's residual (the optimizer's: trainer)
  return m;
}

void PowerSgdSync::save(ChunkWriter& w) const {
  if (!e_.defined()) return;
  const torch::Tensor e = e_.cpu().contiguous();
  put_flat(w, "powersgd.error", dp_->rank(), e.data_ptr<float>());
  const auto& named = stage_->params();
  for (const Matrix& k : mats_)
    w.put("powersgd.q/" + checkpoint_name(named[k.slot]), -1, 0, {k.m, k.r}, q_of(k).cpu());
  w.put("powersgd.steps", -1, 0, {1}, torch::tensor({steps_}, torch::kInt64));
  w.put("powersgd.rank", -1, 0, {1}, torch::tensor({cfg_.rank}, torch::kInt64));
}

void PowerSgdSync::load(const ChunkReader& r) {
  if (!e_.defined()) return;
  torch::Tensor e = torch::zeros({e_.numel()}, torch::kFloat32);
  get_flat(r, "powersgd.error", dp_->rank(), e.data_ptr<float>());  // absent: zero
  e_.copy_(e);
  torch::Tensor steps = torch::zeros({1}, torch::kInt64), rank = torch::zeros({1}, torch::kInt64);
  if (r.get("powersgd.steps", -1, 0, steps)) steps_ = steps.item<int64_t>();
  fresh_q();
  // Q only from a checkpoint of the same rank (its shapes); otherwise the fresh draw.
  if (!r.get("powersgd.rank", -1, 0, rank) || rank.item<int64_t>() != cfg_.rank) return;
  const auto& named = stage_->params();
  for (const Matrix& k : mats_) {
    torch::Tensor q = torch::empty({k.m * k.r}, torch::kFloat32);
    if (r.get("powersgd.q/" + checkpoint_name(named[k.slot]), -1, 0, q))
      q_of(k).view({-1}).copy_(q);
  }
}

}  // namespace loom::parallel
