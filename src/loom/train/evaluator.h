#pragma once
// Evaluation: up to train.eval_batches global batches of the eval split through the pipeline
// (forward only); the ranks that own the last stage (one per replica) compute the loss and,
// for classifiers, the accuracy, and every rank gets the means.
#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/model/model.h"
#include "loom/train/data_feed.h"

namespace loom::parallel {
class Executor;
}  // namespace loom::parallel

namespace loom::train {

struct EvalResult {
  double loss = 0;
  double accuracy = -1;  // classifiers only
};

class Evaluator {
 public:
  // world: every training rank (the sums run over it). m, micro_batch: per replica and step.
  // loss: the model's criterion (collective under tensor parallelism, so every rank of the
  // last stage computes it); counts: whether this rank's losses enter the sums (one rank per
  // replica).
  Evaluator(const config::Config& cfg, comm::Backend& world, parallel::Executor& exec,
            DataFeed& feed, int m, int64_t micro_batch, bool classifier, model::LossFn loss,
            bool has_last_stage, bool counts);
  // Collective over world. final: the run's last evaluation (may cover more of the test split).
  EvalResult run(bool final = false);

 private:
  const config::Config& cfg_;
  comm::Backend& world_;
  parallel::Executor& exec_;
  DataFeed& feed_;
  int m_;
  int64_t micro_batch_;
  bool classifier_;
  model::LossFn loss_;
  bool has_last_stage_, counts_;
};

}  // namespace loom::train
