#include "loom/train/evaluator.h"

#include <cmath>

#include "loom/model/model.h"
#include "loom/parallel/executor.h"

namespace loom::train {
Evaluator::Evaluator(const config::Config& cfg, comm::Backend& world, parallel::Executor& exec,
                     DataFeed& feed, int m, int64_t micro_batch, bool classifier,
                     model::LossFn loss, bool has_last_stage, bool counts)
    : cfg_(cfg),
      world_(world),
      exec_(exec),
      feed_(feed),
      m_(m),
      micro_batch_(micro_batch),
      classifier_(classifier),
      loss_(std::move(loss)),
      has_last_stage_(has_last_stage),
      counts_(counts) {}

EvalResult Evaluator::run(bool /*final*/) {
  double loss_sum = 0, correct = 0, count = 0;
  const int64_t global_batch = cfg_.train.global_batch;
  int64_t batches = std::max<int64_t>(
      1, std::min<int64_t>(cfg_.train.eval_batches, feed_.eval_size() / global_batch));
  if (feed_.eval_size() < global_batch) batches = 0;
  MicroBatches mb;
  torch::Tensor losses, hits;  // on the device, read once at the end
  auto add = [](torch::Tensor& sum, const torch::Tensor& v) { sum = sum.defined() ? sum + v : v; };
  for (int64_t i = 0; i < batches; ++i) {
    feed_.eval(i, &mb);
    auto logits = exec_.run_forward(mb.inputs, m_);
    if (!has_last_stage_) continue;
    torch::NoGradGuard ng;
    for (int j = 0; j < m_; ++j) {
      const torch::Tensor loss = loss_(logits[j], mb.targets[j]);  // a collective under tp
      if (!counts_) continue;
      add(losses, loss.to(torch::kFloat64));
      count += 1;
      if (classifier_) add(hits, logits[j].argmax(1).eq(mb.targets[j]).sum());
    }
  }
  if (losses.defined()) loss_sum = losses.item<double>();
  if (hits.defined()) correct = hits.item<double>();
  // Only the last stage's ranks (one per replica) contribute.
  const double n_loss = comm::sum_over(world_, count);
  const double total = comm::sum_over(world_, loss_sum);
  const double acc = comm::sum_over(world_, correct);
  const double samples = n_loss * micro_batch_;
  return {n_loss > 0 ? total / n_loss : NAN, classifier_ && samples > 0 ? acc / samples : -1};
}

}  // namespace loom::train
