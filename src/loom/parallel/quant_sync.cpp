#include "loom/parallel/quant_sync.h"

#include <cmath>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

// The first n values of v as a CPU tensor (no copy).
torch::Tensor host(std::vector<float>& v, int64_t n) {
  return torch::from_blob(v.data(), {n}, torch::kFloat32);
}

}  // namespace

QuantSync::QuantSync(const SyncContext& ctx) : DataParallel(ctx, BufferOptions{}) {
  n_ = buffer_.layout().numel;
  if (dp_->size() == 1) return;
  quant::Format fmt;
  fmt.bits = static_cast<int>(ctx.cfg->quant.bits);
  fmt.block = ctx.cfg->quant.block;
  quant::Format gather = fmt;  // the mean's error is not fed back: never clipped
  if (ctx.cfg->quant.gather_bits > 0) gather.bits = static_cast<int>(ctx.cfg->quant.gather_bits);
  fmt.rms_clip = static_cast<float>(ctx.cfg->quant.rms_clip);
  mean_ = std::make_unique<QuantizedMean>(*dp_, n_, fmt, gather, ctx.cfg->quant.entropy);
  x_.assign(mean_->padded(), 0.0f);
  e_.assign(mean_->padded(), 0.0f);
}

void QuantSync::reduce_grad() {
  if (!mean_ || mean_->in_flight()) return;
  host(x_, n_).copy_(buffer_.grads().narrow(0, 0, n_));  // from the device, if on one
  for (int64_t i = 0; i < n_; ++i) x_[i] += e_[i];       // error feedback (padding stays 0)
  mean_->start(x_.data());
  // New residual from exactly what was sent: e = x - dequant(quant(x)).
  mean_->decode_sent(e_.data());
  double ee = 0, xx = 0;
  for (int64_t i = 0; i < n_; ++i) {
    e_[i] = x_[i] - e_[i];
    ee += double(e_[i]) * e_[i];
    xx += double(x_[i]) * x_[i];
  }
  residual_ = xx > 0 ? std::sqrt(ee / xx) : 0.0;
}

void QuantSync::finish_grad_sync() {
  if (!mean_) return;
  LOOM_CHECK(mean_->in_flight(), "finish_grad_sync() before reduce_grad() on stage ",
             stage_->index());
  mean_->finish(x_.data());
  exposed_s_ += mean_->waited_s();
  bytes_ = mean_->bytes();
  buffer_.grads().narrow(0, 0, n_).copy_(host(x_, n_));  // the mean
}

std::vector<std::pair<std::string, double>> QuantSync::step_metrics() const {
  return {{"quant_bytes", bytes_},
          {"quant_sync_fraction", dp_->size() > 1 ? 1.0 : 0.0},
          {"quant_residual", residual_}};
}

MemoryBytes QuantSync::memory() const {
  MemoryBytes m = buffer_.memory();  // parameters and their gradient
  if (mean_) m.grads += static_cast<int64_t>(x_.size()) * 4 + mean_->buffer_bytes();
  m.optimizer = static_cast<int64_t>(e_.size()) * 4;  // residual (the optimizer's own: trainer)
  return m;
}

void QuantSync::save(ChunkWriter& w) const {
  if (!e_.empty()) put_flat(w, "quant.residual", dp_->rank(), e_.data());
}

void QuantSync::load(const ChunkReader& r) {
  std::fill(e_.begin(), e_.end(), 0.0f);
  if (!e_.empty()) get_flat(r, "quant.residual", dp_->rank(), e_.data());
}

}  // namespace loom::parallel
