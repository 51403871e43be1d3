#include "loom/train/evaluator.h"

#include <cmath>

#include "loom/model/model.h"
#include "loom/parallel/executor.h"

namespace loom::train {

int64_t eval_batch_count(const config::Config& cfg, int64_t eval_size, bool final) {
  const int64_t global_batch = cfg.train.global_batch;
  if (final) return (eval_size + global_batch - 1) / global_batch;
  if (eval_size < global_batch) return 0;
  return std::max<int64_t>(1, std::min<int64_t>(cfg.train.eval_batches, eval_size / global_batch));
}

Evaluator::Evaluator(const config::Config& cfg, comm::Backend& world, parallel::Executor& exec,
                     DataFeed& feed, int m, int64_t /*micro_batch*/, bool classifier,
                     model::LossFn loss, bool has_last_stage, bool counts)
    : cfg_(cfg),
      world_(world),
      exec_(exec),
      feed_(feed),
      m_(m),
      classifier_(classifier),
      loss_(std::move(loss)),
      has_last_stage_(has_last_stage),
      counts_(counts) {}

EvalResult Evaluator::run(bool final) {
  double loss_sum = 0, correct = 0, count = 0;
  const int64_t batches = eval_batch_count(cfg_, feed_.eval_size(), final);
  MicroBatches mb;
  torch::Tensor losses, hits;  // on the device, read once at the end
  auto add = [](torch::Tensor& sum, const torch::Tensor& v) { sum = sum.defined() ? sum + v : v; };
  for (int64_t i = 0; i < batches; ++i) {
    feed_.eval(i, &mb);
    auto logits = exec_.run_forward(mb.inputs, m_);
    if (!has_last_stage_) continue;
    torch::NoGradGuard ng;
    for (int j = 0; j < m_; ++j) {
      // The padding of a last, partial batch stays out (the same on every tp rank: the
      // criterion is a collective there).
      const int64_t real = feed_.eval_real_samples(i, j);
      if (real == 0) continue;
      const torch::Tensor out = logits[j].narrow(0, 0, real);
      const torch::Tensor target = mb.targets[j].narrow(0, 0, real);
      const torch::Tensor loss = loss_(out, target);  // mean over the real samples
      if (!counts_) continue;
      add(losses, loss.to(torch::kFloat64) * static_cast<double>(real));
      count += static_cast<double>(real);
      if (classifier_) add(hits, out.argmax(1).eq(target).sum());
    }
  }
  if (losses.defined()) loss_sum = losses.item<double>();
  if (hits.defined()) correct = hits.item<double>();
  // Only the last stage's ranks (one per replica) contribute.
  const double samples = comm::sum_over(world_, count);
  const double total = comm::sum_over(world_, loss_sum);
  const double acc = comm::sum_over(world_, correct);
  return {samples > 0 ? total / samples : NAN, classifier_ && samples > 0 ? acc / samples : -1,
          static_cast<int64_t>(samples)};
}

}  // namespace loom::train
