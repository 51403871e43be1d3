#pragma once
// The mean over a data-parallel group of a flat fp32 vector, sent quantized (quantize.h) in two
// phases. --dp-mode quant sends gradients this way, streaming-diloco its outer gradients.
//   start()    the vector (padded() values, zeros past the real ones) is cut into d shards,
//              each encoded; an all-to-all sends shard j to rank j;
//   finish()   each rank dequantizes the d pieces of its shard, sums them in fp32 and divides
//              by d, re-encodes that mean (in the gather format, by default the same), and an
//              all-gather and a dequantization give every rank the same mean vector.
// The all-to-all runs while the caller computes (its Work is waited for in finish()); the
// all-gather is waited for at once. A rank sends about (d-1)/d (bits/8 + 4/block) bytes per
// value in each phase, where an fp32 ring all-reduce sends 2 (d-1)/d * 4.
#include <cstdint>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/parallel/quantize.h"

namespace loom::parallel {

class QuantizedMean {
 public:
  QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f);
  // The shards in `f`, the mean in `gather`.
  QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f, quant::Format gather);
  // Waits for an all-to-all still writing into this object's buffers.
  ~QuantizedMean();
  QuantizedMean(const QuantizedMean&) = delete;
  QuantizedMean& operator=(const QuantizedMean&) = delete;
  // Values start() reads and finish() writes: n rounded up to d shards.
  int64_t padded() const { return shard_ * dp_->size(); }
  void start(const float* x);
  // What start() sent, dequantized (padded() values): the error feedback's reference.
  void decode_sent(float* out) const;
  // Waits for the exchange and writes the mean (padded() values).
  void finish(float* out);
  bool in_flight() const { return exchange_ != nullptr; }
  // Bytes this rank sent since start(), and seconds finish() waited.
  double bytes() const { return bytes_; }
  double waited_s() const { return waited_s_; }
  int64_t buffer_bytes() const;

 private:
  comm::Backend* dp_;
  quant::Format fmt_, gather_fmt_;
  // Values per shard, encoded bytes per shard in each phase.
  int64_t shard_ = 0, chunk_ = 0, gather_chunk_ = 0;
  std::vector<float> sum_;
  std::vector<uint8_t> send_, recv_, mine_, gathered_;
  comm::WorkPtr exchange_;
  double bytes_ = 0, waited_s_ = 0;
};

}  // namespace loom::parallel
