#include "loom/parallel/quant_sync.h"

#include <cmath>
#include <cstring>

#include "loom/common/error.h"

namespace loom::parallel {

QuantSync::QuantSync(const SyncContext& ctx) : stage_(ctx.stage), dp_(ctx.dp) {
  fmt_.bits = static_cast<int>(ctx.cfg->quant.bits);
  fmt_.block = ctx.cfg->quant.block;
  for (const auto& p : stage_->params()) {
    LOOM_CHECK(p.tensor.scalar_type() == torch::kFloat32, "quant needs float32 parameters; ",
               p.name, " is not");
    params_.push_back(p.tensor);
    n_ += p.tensor.numel();
  }
  opt_ = make_optimizer(params_, ctx.cfg->train);
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
  torch::NoGradGuard no_grad;
  int64_t off = 0;
  for (auto& p : params_) {
    const int64_t k = p.numel();
    if (p.grad().defined()) {
      auto g = p.grad().contiguous();
      std::memcpy(x_.data() + off, g.data_ptr<float>(), k * sizeof(float));
    } else {
      std::fill(x_.begin() + off, x_.begin() + off + k, 0.0f);
    }
    off += k;
  }
  for (int64_t i = 0; i < n_; ++i) x_[i] += e_[i];  // error feedback (padding stays 0)
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

void QuantSync::finish() {
  const int d = dp_->size();
  if (d == 1) return;
  LOOM_CHECK(exchange_ != nullptr, "finish() before reduce_grad() on stage ", stage_->index());
  exchange_->wait();
  exposed_s_ += exchange_->waited_s();
  exchange_.reset();
  // This rank's shard: the mean of every rank's dequantized piece, summed in fp32.
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (int r = 0; r < d; ++r) quant::decode_add(recv_.data() + r * chunk_, shard_, fmt_, sum_.data());
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
  torch::NoGradGuard no_grad;
  int64_t off = 0;
  for (auto& p : params_) {
    auto mean = torch::from_blob(x_.data() + off, p.sizes(), torch::kFloat32);
    if (p.grad().defined())
      p.mutable_grad().copy_(mean);
    else
      p.mutable_grad() = mean.clone();
    off += p.numel();
  }
}

double QuantSync::grad_norm_sq() {
  if (dp_->rank() != 0) return 0;
  return grad_sq_sum(params_);
}

void QuantSync::step(double lr, double grad_scale) {
  scaled_step(*opt_, params_, lr, grad_scale);
}

std::vector<std::pair<std::string, double>> QuantSync::step_metrics() const {
  return {{"quant_bytes", bytes_},
          {"quant_sync_fraction", dp_->size() > 1 ? 1.0 : 0.0},
          {"quant_residual", residual_}};
}

MemoryBytes QuantSync::memory() const {
  MemoryBytes m;
  m.params = n_ * 4;
  m.grads = n_ * 4 + static_cast<int64_t>(x_.size() + sum_.size()) * 4 +
            static_cast<int64_t>(send_.size() + recv_.size() + mine_.size() + gathered_.size());
  m.optimizer = (dynamic_cast<torch::optim::AdamW*>(opt_.get()) ? 2 : 1) * n_ * 4;
  m.optimizer += static_cast<int64_t>(e_.size()) * 4;  // residual
  return m;
}

void QuantSync::save(torch::serialize::OutputArchive& ar) const {
  torch::serialize::OutputArchive opt;
  opt_->save(opt);
  ar.write("optimizer", opt);
  ar.write("residual", torch::from_blob(const_cast<float*>(e_.data()),
                                        {static_cast<int64_t>(e_.size())}, torch::kFloat32)
                           .clone());
}

void QuantSync::load(torch::serialize::InputArchive& ar) {
  torch::serialize::InputArchive opt;
  ar.read("optimizer", opt);
  opt_->load(opt);
  torch::Tensor t;
  ar.read("residual", t);
  LOOM_CHECK_EQ(t.numel(), static_cast<int64_t>(e_.size()), "checkpoint residual has the wrong size");
  if (!e_.empty()) std::memcpy(e_.data(), t.contiguous().data_ptr<float>(), e_.size() * 4);
}

}  // namespace loom::parallel
