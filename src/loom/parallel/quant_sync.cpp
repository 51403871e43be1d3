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
  fmt_.bits = static_cast<int>(ctx.cfg->quant.bits);
  fmt_.block = ctx.cfg->quant.block;
  n_ = buffer_.layout().numel;
  const int d = dp_->size();
  // Shards of ceil(n / d) values (the last block of a shard may be short): at most d - 1
  // padding values, whatever the block size.
  shard_ = (n_ + d - 1) / d;
  chunk_ = quant::encoded_bytes(shard_, fmt_);
  if (d > 1) {
    x_.assign(d * shard_, 0.0f);
    e_.assign(d * shard_, 0.0f);
    sum_.assign(shard_, 0.0f);
    send_.resize(d * chunk_);
    recv_.resize(d * chunk_);
    mine_.resize(chunk_);
    gathered_.resize(d * chunk_);
  }
}

void QuantSync::reduce_grad() {
  const int d = dp_->size();
  if (d == 1 || exchange_) return;
  bytes_ = 0;
  host(x_, n_).copy_(buffer_.grads().narrow(0, 0, n_));  // from the device, if on one
  for (int64_t i = 0; i < n_; ++i) x_[i] += e_[i];       // error feedback (padding stays 0)
  for (int j = 0; j < d; ++j)
    quant::encode(x_.data() + j * shard_, shard_, fmt_, send_.data() + j * chunk_);
  // New residual from exactly what was sent: e = x - dequant(quant(x)).
  for (int j = 0; j < d; ++j)
    quant::decode(send_.data() + j * chunk_, shard_, fmt_, e_.data() + j * shard_);
  double ee = 0, xx = 0;
  for (int64_t i = 0; i < n_; ++i) {
    e_[i] = x_[i] - e_[i];
    ee += double(e_[i]) * e_[i];
    xx += double(x_[i]) * x_[i];
  }
  residual_ = xx > 0 ? std::sqrt(ee / xx) : 0.0;
  auto before = dp_->stats();
  exchange_ = dp_->all_to_all(send_.data(), recv_.data(), chunk_, comm::DType::UInt8);
  bytes_ += double((dp_->stats() - before).total_bytes());
}

void QuantSync::finish_grad_sync() {
  const int d = dp_->size();
  if (d == 1) return;
  LOOM_CHECK(exchange_ != nullptr, "finish_grad_sync() before reduce_grad() on stage ",
             stage_->index());
  exchange_->wait();
  exposed_s_ += exchange_->waited_s();
  exchange_.reset();
  // This rank's shard: the mean of every rank's dequantized piece, summed in fp32.
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (int r = 0; r < d; ++r)
    quant::decode_add(recv_.data() + r * chunk_, shard_, fmt_, sum_.data());
  const float inv = 1.0f / static_cast<float>(d);
  for (auto& v : sum_) v *= inv;
  quant::encode(sum_.data(), shard_, fmt_, mine_.data());
  auto before = dp_->stats();
  auto gather = dp_->all_gather(mine_.data(), gathered_.data(), chunk_, comm::DType::UInt8);
  bytes_ += double((dp_->stats() - before).total_bytes());
  gather->wait();
  exposed_s_ += gather->waited_s();
  for (int j = 0; j < d; ++j)
    quant::decode(gathered_.data() + j * chunk_, shard_, fmt_, x_.data() + j * shard_);
  buffer_.grads().narrow(0, 0, n_).copy_(host(x_, n_));  // the mean
}

std::vector<std::pair<std::string, double>> QuantSync::step_metrics() const {
  return {{"quant_bytes", bytes_},
          {"quant_sync_fraction", dp_->size() > 1 ? 1.0 : 0.0},
          {"quant_residual", residual_}};
}

MemoryBytes QuantSync::memory() const {
  MemoryBytes m = buffer_.memory();  // parameters and their gradient
  m.grads += static_cast<int64_t>(x_.size() + sum_.size()) * 4 +
             static_cast<int64_t>(send_.size() + recv_.size() + mine_.size() + gathered_.size());
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
