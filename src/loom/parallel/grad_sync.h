#pragma once
// Data-parallel gradient synchronizers (Flashlight's Reducer idea): one per pipeline stage,
// one interface, one implementation per --dp-mode. The executor drives them through the
// schedule's actions; the trainer finishes the step:
//
//   executor:  unshard()            UNSHARD action (zero3: start all-gathering parameters)
//              before_compute()     right before each F/B/I/W of the stage (zero3: wait for
//                                   the gather; zero2/3: gradient buffer before a backward)
//              on_last_backward()   right before the stage's last B/W of the step
//              reduce_grad()        REDUCE_GRAD action (start every reduction not started yet)
//              reshard()            RESHARD action
//   trainer:   finish()             wait for the reductions: grads are the mean over dp
//              grad_norm_sq()       this rank's share of the squared global norm
//              step(lr, scale)      optimizer update with gradients multiplied by scale
//
// Collectives on the DP communicator are issued in the same order on every replica because
// every replica runs the same action list and the same autograd graph (deterministic order).
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/parallel/stage.h"

namespace loom::parallel {

// Bytes this rank holds for one stage, by category (per-rank accounting).
struct MemoryBytes {
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;
  // Of the above, transient full-size copies (zero3: gathered parameters; zero2/3: the full
  // gradient during the backward), at their peak. 0 for modes without such copies.
  int64_t working = 0;
  int64_t total() const { return params + grads + optimizer; }
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual std::string name() const = 0;
  virtual void unshard() {}
  virtual void reshard() {}
  // backward: the compute is B, I or W. Blocks until the stage's parameters are usable.
  virtual void before_compute(bool /*backward*/) {}
  virtual void on_last_backward() {}
  virtual void reduce_grad() = 0;
  virtual void finish() = 0;
  virtual double grad_norm_sq() = 0;
  virtual void step(double lr, double grad_scale) = 0;
  virtual MemoryBytes memory() const = 0;
  // Transient full-size bytes held right now (the executor samples it after every action to
  // find the rank's concurrent peak; MemoryBytes::working is this stage's own peak).
  virtual int64_t working_bytes() const { return 0; }
  // Seconds the caller spent blocked on this synchronizer's communication in the step.
  double exposed_wait_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }
  // Optimizer state and anything else a resumed run needs.
  virtual void save(torch::serialize::OutputArchive& ar) const = 0;
  virtual void load(torch::serialize::InputArchive& ar) = 0;
  // Sharded modes: save()/load() carry this rank's shard of the parameters, so the trainer
  // neither writes nor reads the stage's parameter tensors (zero3 leaves them empty).
  virtual bool saves_params() const { return false; }
  // The stage's complete parameters by name (copies). Sharded modes gather them: a collective
  // over the DP group, so every replica calls it for the same stages in the same order.
  // Empty: the stage's own tensors are complete (unsharded modes).
  virtual std::vector<NamedParam> full_params() { return {}; }
  // Per-step report line items (e.g. slim: fraction synchronized, drift); may be empty.
  virtual std::vector<std::pair<std::string, double>> step_metrics() const { return {}; }

 protected:
  double exposed_s_ = 0;
};

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const config::TrainConfig& t);
void set_lr(torch::optim::Optimizer& opt, double lr);
// Shared by the modes whose replicas all hold the same averaged full gradients:
// squared norm of `params`' gradients (callers return it from dp rank 0 only), and one
// optimizer step with gradients multiplied by grad_scale, then dropped (left undefined).
double grad_sq_sum(const std::vector<torch::Tensor>& params);

// Calls on_ready(i) each time params[i]'s AccumulateGrad has added a gradient (so, in the last
// micro-batch's backward, when that gradient is final). The hooks live on the accumulator
// nodes, which a parameter holds only weakly: keep the returned nodes as long as the hooks.
std::vector<std::shared_ptr<torch::autograd::Node>> on_grad_accumulated(
    const std::vector<torch::Tensor>& params, std::function<void(int)> on_ready);
void scaled_step(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params,
                 double lr, double grad_scale);

struct SyncContext {
  Stage* stage = nullptr;
  comm::Backend* dp = nullptr;  // size 1 when dp == 1
  const config::Config* cfg = nullptr;
};

// Factory for --dp-mode; throws UsageError for modes that are not built.
std::unique_ptr<GradSync> make_grad_sync(const SyncContext& ctx);

}  // namespace loom::parallel
