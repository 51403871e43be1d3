#pragma once
// Where each parameter of a stage lives in one flat fp32 buffer (sharded data parallelism).
// The buffer is padded with zeros to a multiple of `parts` and split into `parts` contiguous
// shards of equal size; rank i of the DP group owns shard i. The padding stays zero: its
// gradient is zero on every rank, so any elementwise optimizer leaves it at zero.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace loom::parallel {

struct FlatLayout {
  struct Slot {
    int64_t offset = 0;
    int64_t numel = 0;
    std::vector<int64_t> shape;
  };
  std::vector<Slot> slots;  // one per parameter, in the stage's parameter order
  int64_t numel = 0;        // sum of the parameters' sizes
  int64_t padded = 0;       // numel rounded up to a multiple of parts
  int64_t shard = 0;        // padded / parts
  int parts = 1;

  static FlatLayout of(const std::vector<torch::Tensor>& params, int parts);
  // A zero-padded flat copy of the parameters' current values.
  torch::Tensor flatten(const std::vector<torch::Tensor>& params) const;
  // Parameter i's piece of a flat buffer, shaped like the parameter (shares its memory).
  torch::Tensor view(const torch::Tensor& flat, size_t i) const;
  // Shard `part` of a flat buffer (shares its memory).
  torch::Tensor shard_of(const torch::Tensor& flat, int part) const;
};

}  // namespace loom::parallel
