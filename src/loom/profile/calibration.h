#pragma once
// Speed calibration during a run (`output.calibrate_every = N`): after every N-th step, each
// rank in turn times one transformer layer's forward + backward alone while the others wait
// at a barrier, the unit `loom profile` times (model/block_timing.h); then all ranks time it
// at once, as `loom profile` measures the slowdown under load. Outside the step time.
//
// Why: a shared virtual machine changes speed by up to 2x for seconds at a time, because of other
// tenants (docs/notes/planner-validation.md). A profile taken before a run can measure another
// machine than the one the run got; these samples, taken between the run's steps, say how fast the
// machine was during it, so that a prediction can be checked against the machine that ran.
// `loom profile` runs the same on twice as many ranks as cores: what they lose beyond a fair
// share of the cores is the cluster's `oversubscribed` (profile/links.h).
#include <torch/torch.h>

#include <vector>

#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/model/model.h"

namespace loom::profile {

class Calibration {
 public:
  // A layer of its own (the training parameters are untouched, even when sharded), its input
  // and output gradient drawn from a generator of its own (the run's random stream is too).
  Calibration(const config::ModelConfig& model, int64_t micro_batch, uint64_t seed);

  struct Times {
    std::vector<double> alone;   // per rank: seconds, the median of `reps` forward + backward
    std::vector<double> loaded;  // the same with every rank computing at once
  };
  // Collective; every rank gets every rank's times.
  Times run(comm::Backend& world, int reps = 3);

  int64_t micro_batch() const { return micro_batch_; }

 private:
  std::shared_ptr<model::Block> layer_;
  torch::Tensor input_, grad_, none_;
  int64_t micro_batch_;
};

}  // namespace loom::profile
