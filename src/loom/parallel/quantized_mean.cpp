#include "loom/parallel/quantized_mean.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::parallel {

QuantizedMean::QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f)
    : QuantizedMean(dp, n, f, f) {}

QuantizedMean::QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f, quant::Format gather)
    : dp_(&dp), fmt_(f), gather_fmt_(gather) {
  const int d = dp.size();
  // Shards of ceil(n / d) values (the last block of a shard may be short): at most d - 1
  // padding values, whatever the block size.
  shard_ = (n + d - 1) / d;
  chunk_ = quant::encoded_bytes(shard_, fmt_);
  gather_chunk_ = quant::encoded_bytes(shard_, gather_fmt_);
  sum_.assign(shard_, 0.0f);
  send_.resize(d * chunk_);
  recv_.resize(d * chunk_);
  mine_.resize(gather_chunk_);
  gathered_.resize(d * gather_chunk_);
}

QuantizedMean::~QuantizedMean() {
  if (!exchange_) return;
  try {
    exchange_->wait();
  } catch (...) {  // the run is failing already; the buffers must only outlive the call
  }
}

void QuantizedMean::start(const float* x) {
  LOOM_CHECK(!exchange_, "QuantizedMean::start() while an exchange is in flight");
  const int d = dp_->size();
  for (int j = 0; j < d; ++j)
    quant::encode(x + j * shard_, shard_, fmt_, send_.data() + j * chunk_);
  const comm::Stats before = dp_->stats();
  exchange_ = dp_->all_to_all(send_.data(), recv_.data(), chunk_, comm::DType::UInt8);
  bytes_ = double((dp_->stats() - before).total_bytes());
  waited_s_ = 0;
}

void QuantizedMean::decode_sent(float* out) const {
  for (int j = 0; j < dp_->size(); ++j)
    quant::decode(send_.data() + j * chunk_, shard_, fmt_, out + j * shard_);
}

void QuantizedMean::finish(float* out) {
  LOOM_CHECK(exchange_ != nullptr, "QuantizedMean::finish() without start()");
  const int d = dp_->size();
  exchange_->wait();
  waited_s_ += exchange_->waited_s();
  exchange_.reset();
  // This rank's shard: the mean of every rank's dequantized piece, summed in fp32.
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (int r = 0; r < d; ++r)
    quant::decode_add(recv_.data() + r * chunk_, shard_, fmt_, sum_.data());
  const float inv = 1.0f / static_cast<float>(d);
  for (auto& v : sum_) v *= inv;
  quant::encode(sum_.data(), shard_, gather_fmt_, mine_.data());
  const comm::Stats before = dp_->stats();
  auto gather = dp_->all_gather(mine_.data(), gathered_.data(), gather_chunk_, comm::DType::UInt8);
  bytes_ += double((dp_->stats() - before).total_bytes());
  gather->wait();
  waited_s_ += gather->waited_s();
  for (int j = 0; j < d; ++j)
    quant::decode(gathered_.data() + j * gather_chunk_, shard_, gather_fmt_, out + j * shard_);
}

int64_t QuantizedMean::buffer_bytes() const {
  return static_cast<int64_t>(sum_.size()) * 4 +
         static_cast<int64_t>(send_.size() + recv_.size() + mine_.size() + gathered_.size());
}

}  // namespace loom::parallel
