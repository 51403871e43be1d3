#pragma once
// Evaluation: global batches of the eval split through the pipeline (forward only); the ranks
// that own the last stage (one per replica) compute the loss and, for classifiers, the
// accuracy, and every rank gets the means over the samples read. During the run that is
// train.eval_batches batches; the last evaluation of a run reads the whole split (the last
// batch padded to the full shape, the padding left out of the means).
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
  int64_t samples = 0;   // read (each counted once): the whole split when final
};

// Global batches an evaluation reads from a split of `eval_size` samples: during the run
// train.eval_batches (at most the split's full batches; none when it has none); final: every
// sample, the last batch partial.
int64_t eval_batch_count(const config::Config& cfg, int64_t eval_size, bool final);

class Evaluator {
 public:
  // world: every training rank (the sums run over it). m, micro_batch: per replica and step
  // (the feed cuts the micro-batches).
  // loss: the model's criterion (collective under tensor parallelism, so every rank of the
  // last stage computes it); counts: whether this rank's losses enter the sums (one rank per
  // replica).
  Evaluator(const config::Config& cfg, comm::Backend& world, parallel::Executor& exec,
            DataFeed& feed, int m, int64_t micro_batch, bool classifier, model::LossFn loss,
            bool has_last_stage, bool counts);
  // Collective over world. final: the run's last evaluation (the whole test split).
  EvalResult run(bool final = false);

 private:
  const config::Config& cfg_;
  comm::Backend& world_;
  parallel::Executor& exec_;
  DataFeed& feed_;
  int m_;
  bool classifier_;
  model::LossFn loss_;
  bool has_last_stage_, counts_;
};

}  // namespace loom::train
