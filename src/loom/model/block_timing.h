#pragma once
// One block's forward (with autograd, as in training) and backward, timed: the unit that
// `loom profile` measures per block and that `loom train --output.calibrate_every` measures
// again during a run, so that both time exactly the same work.
#include <torch/torch.h>

#include <vector>

#include "loom/model/model.h"

namespace loom::model {

// The block's output for `input` (activations, or token ids for the embedding); for the head
// (`target` defined: its token ids) the loss instead, by `loss` (the model's criterion: the
// vocabulary-parallel one under tensor parallelism). Float inputs get requires_grad, so the
// backward computes the input gradient as a pipeline stage does.
torch::Tensor forward_for_timing(Block& block, const torch::Tensor& input,
                                 const torch::Tensor& target, const LossFn& loss = &Model::loss);

// Seconds of forward + backward. The backward starts from the loss (head) or from `grad`, the
// output gradient; an undefined `grad` is drawn (standard normal) on first use and kept.
double time_forward_backward(Block& block, const torch::Tensor& input, const torch::Tensor& target,
                             torch::Tensor& grad, const LossFn& loss = &Model::loss);

// How many micro-batches a timing keeps in flight, as a pipeline stage does: the forwards of
// that many copies of the input with their autograd graphs alive, then their backwards, last
// first. Each pass so writes fresh activations and each backward reads them after other
// passes' work, as in a training step. A loop over one input reuses the same buffers, warm in
// cache: on a 2-core VM it timed a layer 8-17% faster than this, and one rank's steps were
// predicted 14% fast from it, 4% from this (docs/notes/planner-validation.md, 2026-12-04).
constexpr int kTimingInFlight = 4;

// Seconds of each forward and each backward of kTimingInFlight micro-batches timed so (the
// copies are made outside the timed passes); `grad` as for time_forward_backward. With
// `split_weights` (the block's parameters; a float input) each backward runs as the zero-bubble
// split does (model/linear_uses.h): I, then W, each timed, and backward = I + W.
struct InFlightTimes {
  std::vector<double> forward_s, backward_s, input_s, weight_s;
};
InFlightTimes time_in_flight(Block& block, const torch::Tensor& input, const torch::Tensor& target,
                             torch::Tensor& grad, const LossFn& loss = &Model::loss,
                             const std::vector<torch::Tensor>* split_weights = nullptr);

// The median of timing samples (the upper one of the middle two; 0 for none).
double median_of(std::vector<double> samples);

}  // namespace loom::model
