#pragma once
// Internal to loom_profile: timers and the timing of one GPT block.
#include <torch/torch.h>

#include <chrono>
#include <vector>

#include "loom/model/block_timing.h"
#include "loom/model/model.h"

namespace loom::profile {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median seconds of fn over repetitions filling `budget` seconds (at least 3, after 1 warm-up).
template <typename F>
double median_time(F fn, double budget) {
  fn();
  std::vector<double> times;
  auto t_all = Clock::now();
  while (times.size() < 3 || (seconds(t_all) < budget && times.size() < 1000)) {
    auto t0 = Clock::now();
    fn();
    times.push_back(seconds(t0));
  }
  return model::median_of(times);
}

struct BlockTimes {
  double forward_s = 0, backward_s = 0, activation_bytes = 0;
  double input_s = 0, weight_s = 0;  // I and W of the zero-bubble split (0: not measured)
};

// One GPT block at one micro-batch size, and the samples taken of it so far. Samples come in
// rounds spread over the whole profile (this virtual machine's speed drifts by +-20% over tens
// of seconds; a median over rounds sees several of its phases).
struct BlockJob {
  const char* kind;
  int64_t micro_batch;
  model::Block* block;
  torch::Tensor input, target;  // target: the head's tokens (its loss)
  torch::Tensor grad{};         // random output gradient (not the head)
  std::vector<double> fwd{}, both{}, in_s{}, w_s{};
  double activation_bytes = -1;
  int64_t tp = 1;  // a tensor-parallel shard of the block (profile/idle_group.h)
  model::LossFn loss = &model::Model::loss;  // the head's: the model's criterion
};

double forward_backward(BlockJob& j);

// One round of `budget` seconds of samples (sample_block in timing.cpp says how).
void sample_block(BlockJob& j, double budget);

// How much slower the block runs while `load_cores` other cores run it too: loaded / alone.
double sustained_slowdown(BlockJob& j, int load_cores, double budget, double settle);

BlockTimes summarize(const BlockJob& j);

}  // namespace loom::profile
