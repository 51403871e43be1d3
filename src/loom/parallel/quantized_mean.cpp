#include "loom/parallel/quantized_mean.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "loom/common/error.h"

namespace loom::parallel {

QuantizedMean::QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f)
    : QuantizedMean(dp, n, f, f) {}

QuantizedMean::QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f, quant::Format gather,
                             bool entropy)
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
  if (entropy) {
    coder_ = std::make_unique<EntropyCoder>();
    coded_out_.resize(d);
  }
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
  if (coder_) {
    std::vector<const std::vector<uint8_t>*> pieces(d);
    for (int j = 0; j < d; ++j) {
      coded_out_[j].clear();
      if (j != dp_->rank()) pack(send_.data() + j * chunk_, chunk_, fmt_, coded_out_[j]);
      pieces[j] = &coded_out_[j];
    }
    exchange_ = exchange_coded(pieces, kShardTag);
  } else {
    exchange_ = dp_->all_to_all(send_.data(), recv_.data(), chunk_, comm::DType::UInt8);
  }
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
  if (coder_) unpack_arrived(fmt_, chunk_, send_.data() + dp_->rank() * chunk_, recv_.data());
  // This rank's shard: the mean of every rank's dequantized piece, summed in fp32.
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (int r = 0; r < d; ++r)
    quant::decode_add(recv_.data() + r * chunk_, shard_, fmt_, sum_.data());
  const float inv = 1.0f / static_cast<float>(d);
  for (auto& v : sum_) v *= inv;
  quant::encode(sum_.data(), shard_, gather_fmt_, mine_.data());
  const comm::Stats before = dp_->stats();
  comm::WorkPtr gather;
  if (coder_) {
    coded_mine_.clear();
    pack(mine_.data(), gather_chunk_, gather_fmt_, coded_mine_);
    std::vector<const std::vector<uint8_t>*> pieces(d, &coded_mine_);
    static const std::vector<uint8_t> kNothing;
    pieces[dp_->rank()] = &kNothing;
    gather = exchange_coded(pieces, kGatherTag);
  } else {
    gather = dp_->all_gather(mine_.data(), gathered_.data(), gather_chunk_, comm::DType::UInt8);
  }
  bytes_ += double((dp_->stats() - before).total_bytes());
  gather->wait();
  waited_s_ += gather->waited_s();
  if (coder_) unpack_arrived(gather_fmt_, gather_chunk_, mine_.data(), gathered_.data());
  for (int j = 0; j < d; ++j)
    quant::decode(gathered_.data() + j * gather_chunk_, shard_, gather_fmt_, out + j * shard_);
}

void QuantizedMean::pack(const uint8_t* chunk, int64_t bytes, const quant::Format& f,
                         std::vector<uint8_t>& out) {
  const int64_t scales = 4 * quant::num_blocks(shard_, f);
  out.insert(out.end(), chunk, chunk + scales);
  coder_->pack(chunk + scales, static_cast<size_t>(bytes - scales), out);
}

void QuantizedMean::unpack(const std::vector<uint8_t>& in, const quant::Format& f, uint8_t* chunk,
                           int64_t bytes) {
  const int64_t scales = 4 * quant::num_blocks(shard_, f);
  LOOM_CHECK(static_cast<int64_t>(in.size()) >= scales, "quantized piece of ", in.size(),
             " bytes is shorter than its ", scales, " bytes of scales");
  std::memcpy(chunk, in.data(), static_cast<size_t>(scales));
  coder_->unpack(in.data() + scales, in.size() - scales, chunk + scales,
                 static_cast<size_t>(bytes - scales));
}

comm::WorkPtr QuantizedMean::exchange_coded(const std::vector<const std::vector<uint8_t>*>& pieces,
                                            int tag) {
  std::vector<std::span<const uint8_t>> spans;
  for (const auto* p : pieces) spans.emplace_back(p->data(), p->size());
  return dp_->all_to_all_v(spans, coded_in_, tag);
}

void QuantizedMean::unpack_arrived(const quant::Format& f, int64_t bytes, const uint8_t* own,
                                   uint8_t* into) {
  for (int r = 0; r < dp_->size(); ++r) {
    if (r == dp_->rank())
      std::memcpy(into + r * bytes, own, static_cast<size_t>(bytes));
    else
      unpack(coded_in_[r], f, into + r * bytes, bytes);
  }
}

int64_t QuantizedMean::buffer_bytes() const {
  size_t coded = coded_mine_.capacity();
  for (const auto& v : coded_out_) coded += v.capacity();
  for (const auto& v : coded_in_) coded += v.capacity();
  return static_cast<int64_t>(sum_.size()) * 4 +
         static_cast<int64_t>(send_.size() + recv_.size() + mine_.size() + gathered_.size() +
                              coded);
}

}  // namespace loom::parallel
