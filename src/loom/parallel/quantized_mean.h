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
// With `entropy`, each piece's codes (not its scales) travel entropy-coded (entropy_coder.h):
// pieces of their own length, exchanged by all_to_all_v on tags kShardTag and kGatherTag (one
// exchange of each in flight per communicator, as every collective: in the same order on all
// ranks). What is computed does not change, only the bytes sent.
#include <cstdint>
#include <memory>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/parallel/entropy_coder.h"
#include "loom/parallel/quantize.h"

namespace loom::parallel {

class QuantizedMean {
 public:
  QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f);
  // The shards in `f`, the mean in `gather`, the codes entropy-coded or not.
  QuantizedMean(comm::Backend& dp, int64_t n, quant::Format f, quant::Format gather,
                bool entropy = false);
  static constexpr int kShardTag = 1, kGatherTag = 2;
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
  // The encoded chunk `chunk` (`bytes` long, in `f`) as sent: scales as they are, codes coded.
  void pack(const uint8_t* chunk, int64_t bytes, const quant::Format& f, std::vector<uint8_t>& out);
  void unpack(const std::vector<uint8_t>& in, const quant::Format& f, uint8_t* chunk,
              int64_t bytes);
  // Sends the coded pieces (none to this rank) on `tag`; arrivals land in coded_in_.
  comm::WorkPtr exchange_coded(const std::vector<const std::vector<uint8_t>*>& pieces, int tag);
  // The pieces of one phase as d chunks of `bytes` at `into` (this rank's own from `own`).
  void unpack_arrived(const quant::Format& f, int64_t bytes, const uint8_t* own, uint8_t* into);

  comm::Backend* dp_;
  quant::Format fmt_, gather_fmt_;
  // Values per shard, encoded bytes per shard in each phase.
  int64_t shard_ = 0, chunk_ = 0, gather_chunk_ = 0;
  std::vector<float> sum_;
  std::vector<uint8_t> send_, recv_, mine_, gathered_;
  // Entropy coding: the coded pieces sent and received in each phase.
  std::unique_ptr<EntropyCoder> coder_;
  std::vector<std::vector<uint8_t>> coded_out_, coded_in_;
  std::vector<uint8_t> coded_mine_;
  comm::WorkPtr exchange_;
  double bytes_ = 0, waited_s_ = 0;
};

}  // namespace loom::parallel
