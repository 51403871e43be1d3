#pragma once
// A stage's data-parallel mode (--dp-mode): one per pipeline stage, built on the stage's
// ParamBuffer. Three faces:
//   executor  DpHooks (dp_hooks.h): the schedule's UNSHARD / RESHARD / REDUCE_GRAD actions and
//             the compute around them;
//   trainer   the step: finish_grad_sync() -> grad_norm_sq() -> before_step() -> the trainer's
//             optimizer updates optimized_params() -> after_step();
//   checkpoint StateDict: the mode's own state (the optimizer's is the optimizer's).
//
// Collectives on the DP communicator are issued in the same order on every replica because
// every replica runs the same action list and the same autograd graph (deterministic order).
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/config/config.h"
#include "loom/parallel/dp_hooks.h"
#include "loom/parallel/param_buffer.h"
#include "loom/parallel/stage.h"
#include "loom/parallel/state_dict.h"

namespace loom::parallel {

struct SyncContext {
  Stage* stage = nullptr;
  comm::Backend* dp = nullptr;  // size 1 when dp == 1
  const config::Config* cfg = nullptr;
};

class DataParallel : public DpHooks, public StateDict {
 public:
  DataParallel(const SyncContext& ctx, const BufferOptions& o)
      : buffer_(*ctx.stage, *ctx.dp, o), stage_(ctx.stage), dp_(ctx.dp) {}
  virtual std::string name() const = 0;

  // The tensors the stage's optimizer updates, with the gradients it applies in their .grad:
  // the stage's parameters, or this rank's master shard of the buffer.
  virtual std::vector<torch::Tensor> optimized_params() = 0;
  // Waits for the gradient reductions: the optimized tensors' gradients are the mean over dp.
  virtual void finish_grad_sync() = 0;
  // This rank's share of the squared global gradient norm (the trainer sums over the world).
  virtual double grad_norm_sq() = 0;
  // Around the trainer's optimizer update.
  virtual void before_step() {}
  virtual void after_step() = 0;
  // Instead of the optimizer's update (train.on_nan = skip): the step's gradients are
  // dropped by after_step(); a mode that folded them into state of its own undoes that here.
  virtual void drop_step() {}

  // Bytes held for the stage, the optimizer's own state excluded (the trainer adds it).
  virtual MemoryBytes memory() const { return buffer_.memory(); }
  int64_t working_bytes() const override { return buffer_.working_bytes(); }
  double exposed_wait_s() const override { return exposed_s_ + buffer_.exposed_s(); }
  void reset_exposed() {
    exposed_s_ = 0;
    buffer_.reset_exposed();
  }
  // Sharded modes: save()/load() carry this rank's shard of the parameters, so the trainer
  // neither writes nor reads the stage's parameter tensors (zero3 leaves them empty).
  virtual bool saves_params() const { return false; }
  // The stage's complete parameters by name (copies). Sharded modes gather them: a collective
  // over the DP group, so every replica calls it for the same stages in the same order.
  // Empty: the stage's own tensors are complete (unsharded modes).
  virtual std::vector<NamedParam> full_params() { return {}; }
  // Per-step report line items (e.g. slim: fraction synchronized, drift); may be empty.
  virtual std::vector<std::pair<std::string, double>> step_metrics() const { return {}; }
  // No state of its own by default.
  void save(torch::serialize::OutputArchive&) const override {}
  void load(torch::serialize::InputArchive&) override {}

 protected:
  std::vector<torch::Tensor> stage_tensors() const;

  ParamBuffer buffer_;
  Stage* stage_;
  comm::Backend* dp_;
  double exposed_s_ = 0;  // waits outside the buffer (slim, quant)
};

// Factory for --dp-mode: the one place that maps a mode's name to its class.
std::unique_ptr<DataParallel> make_data_parallel(const SyncContext& ctx);

}  // namespace loom::parallel
