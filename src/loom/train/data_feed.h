#pragma once
// The data a step needs on this rank: the train and eval splits of the configured dataset,
// and the micro-batches of (step, replica). Every rank opens the datasets (their sizes decide
// how many evaluation batches everyone runs), but only the ranks that own the first stage
// (inputs) or the last stage (targets) read samples.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "loom/config/config.h"
#include "loom/data/dataset.h"
#include "loom/data/sampler.h"

namespace loom::train {

struct MicroBatches {
  std::vector<torch::Tensor> inputs;  // one per micro-batch; undefined where not needed
  std::vector<torch::Tensor> targets;
};

// The train or test split of the configured dataset (data.kind, data.path, data.tokenizer).
std::unique_ptr<data::Dataset> open_dataset(const config::Config& cfg, data::Split split);

class DataFeed {
 public:
  // dp, dp_rank: the replicas and this rank's; m: micro-batches per replica and step.
  // Batches are made on the host and handed over on `device`.
  DataFeed(const config::Config& cfg, int dp, int dp_rank, int m, bool needs_inputs,
           bool needs_targets, torch::Device device = torch::kCPU);

  void train(int64_t step, MicroBatches* out) { fill(*train_set_, *train_sampler_, step, out); }
  void eval(int64_t batch, MicroBatches* out) { fill(*eval_set_, *eval_sampler_, batch, out); }
  int64_t eval_size() const { return eval_set_->size(); }
  // How many samples of eval micro-batch j of global batch `batch` (this replica's) are in the
  // split: all of them but in a last, partial batch (whose positions past the end wrap around
  // to the first samples, so that every micro-batch keeps its shape).
  int64_t eval_real_samples(int64_t batch, int j) const;

 private:
  void fill(data::Dataset& ds, data::Sampler& smp, int64_t step, MicroBatches* out);

  int64_t global_batch_;
  int dp_, dp_rank_, m_;
  bool needs_inputs_, needs_targets_;
  torch::Device device_;
  std::unique_ptr<data::Dataset> train_set_, eval_set_;
  std::unique_ptr<data::Sampler> train_sampler_, eval_sampler_;
};

}  // namespace loom::train
