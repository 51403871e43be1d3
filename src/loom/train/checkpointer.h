#pragma once
// Saving and resuming a run, in the format of checkpoint.h: each rank writes its stages'
// state to rank-<r>.pt (temporary name, then rename), a barrier, rank 0 writes the manifest
// and the `latest` pointer and keeps only the newest complete checkpoint, a barrier.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/train/preflight.h"

namespace loom::parallel {
class DataParallel;
class Stage;
class StageOptimizer;
}  // namespace loom::parallel

namespace loom::train {

class Checkpointer {
 public:
  using Stages = std::map<int, std::unique_ptr<parallel::Stage>>;
  using Syncs = std::map<int, std::unique_ptr<parallel::DataParallel>>;
  using Optimizers = std::map<int, std::unique_ptr<parallel::StageOptimizer>>;

  // world: every training rank. stages, syncs, optimizers: this rank's, by stage index.
  Checkpointer(const config::Config& cfg, const Resolved& r, comm::Backend& world,
               const Stages& stages, const Syncs& syncs, const Optimizers& optimizers);

  // <output.dir>/checkpoint/step-<steps_done>; collective over world.
  void save(int64_t steps_done);
  // Restores this rank's state from a checkpoint folder (or its parent with `latest`) written
  // with the same mesh and modes; returns the steps it had completed.
  int64_t load(const std::string& path);

 private:
  const config::Config& cfg_;
  Resolved r_;
  comm::Backend& world_;
  const Stages& stages_;
  const Syncs& syncs_;
  const Optimizers& optimizers_;
};

}  // namespace loom::train
