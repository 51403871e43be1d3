#pragma once
// The training loop on a dp x pp mesh: builds the model on every rank (same seed, same
// parameters), keeps this rank's stages, runs the lowered schedule through the executor,
// finishes data-parallel synchronization, clips by the global norm, steps the optimizers,
// reports metrics, evaluates, and writes checkpoints.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/parallel/memory_bytes.h"

namespace loom::train {

struct TrainResult {
  int64_t steps = 0;          // steps run by this call (after a resume: the remaining ones)
  int64_t skipped_steps = 0;  // of which without an update (train.on_nan = skip)
  double final_loss = 0;      // mean training loss of the last step
  double eval_loss = 0;
  double eval_accuracy = -1;  // classifiers only
  double wall_s = 0;
  double items_per_s = 0;  // tokens/s (gpt) or samples/s
  uint64_t dp_bytes = 0;   // this rank, whole run
  uint64_t pp_bytes = 0;
  // This rank's parameters by global name ("blocks.3.qkv.weight"), after the last step
  // (complete tensors also under zero3: gathered for the result).
  std::map<std::string, torch::Tensor> params;
  // The synchronizers' metrics of the last step on this rank, "name.stage" -> value.
  std::map<std::string, double> sync_metrics;
  comm::Stats dp_last_step;      // this rank's DP-group collectives in the last step
  comm::Stats tp_last_step;      // and its tensor-parallel group's (tp > 1)
  parallel::MemoryBytes memory;  // this rank's stages, summed (modes + optimizers)
  // Measured by the executor after every action, maxima over the run: transient DP buffers
  // held at once, and persistent state (memory minus its working parts) + activations + those.
  int64_t peak_working_bytes = 0;
  int64_t peak_bytes = 0;
  // Activations kept between forward and backward at once (this rank, maximum over the run).
  int64_t peak_activation_bytes = 0;
  // Preempted (train/preemption.h): the signal, the steps completed and their checkpoint.
  int stop_signal = 0;
  int64_t stop_step = 0;
  std::string stop_checkpoint;
};

class Trainer {
 public:
  // base: the ranks that train (the world, or a sub-communicator in tests).
  Trainer(const config::Config& cfg, comm::Backend& base);
  ~Trainer();
  // stop_after > 0: return after that many steps of this call (an interrupted run).
  TrainResult run(int64_t stop_after = -1);
  // Before run(): writes a checkpoint of the state just built or resumed, in this run's layout
  // (collective over base); returns its folder. Resuming under one layout and checkpointing
  // converts a checkpoint to that layout.
  std::string checkpoint();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::train
