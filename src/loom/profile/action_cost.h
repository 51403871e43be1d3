#pragma once
// Internal to loom_profile: what a compute action costs beyond the blocks it runs.
//
// A pipeline stage runs its layers for one micro-batch per action. With one layer per action
// (looped schedules: interleaved, breadth-first) every layer starts from an input, and ends on
// an output gradient, that other actions have pushed out of the caches since; with several
// layers per action only the first one does. The blocks are timed one at a time (timing.h), so
// the difference is in no block's time: on a 2-core VM one rank stepped 8% slower with 16
// one-layer actions a step than with 4 four-layer actions of the same layers
// (docs/notes/planner-validation.md, 2026-12-04). Measured here as the simulator adds it: a
// stack of layers run both ways, the difference over the number of extra actions.
#include <torch/torch.h>

#include <vector>

#include "loom/model/model.h"

namespace loom::profile {

struct ActionJob {
  int64_t micro_batch;
  std::vector<model::Block*> layers;  // consecutive layers of one model, at least 2
  torch::Tensor input;                // [micro_batch, seq_len, width]
  torch::Tensor grad{};               // random output gradient, drawn on first use
  std::vector<double> extra_s{};      // per sample: (breadth-first - depth-first) / extra actions
};

// Seconds of one pass of kTimingInFlight micro-batches through the stack, forwards then
// backwards (last micro-batch first), in either order; the same work, the parameters'
// gradients accumulated alike. Depth-first: one action per micro-batch and direction.
// Breadth-first: one per layer, micro-batch and direction, a layer's input a detached copy of
// the previous output as a stage receives it, its output gradient handed down.
double depth_first_s(ActionJob& j);
double breadth_first_s(ActionJob& j);

// One round of `budget` seconds (at least 3 samples after one warm-up): both orders,
// alternating ABBA; a sample is their difference over the actions breadth-first runs more.
void sample_action_cost(ActionJob& j, double budget);

// Seconds one more action costs: the median of the samples, never below 0.
double action_cost_s(const ActionJob& j);

}  // namespace loom::profile
