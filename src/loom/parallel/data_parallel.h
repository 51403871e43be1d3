#pragma once
// A stage's data-parallel mode (--dp-mode): one per pipeline stage, built on the stage's
// ParamBuffer. Three faces:
//   executor  DpHooks (dp_hooks.h): the schedule's UNSHARD / RESHARD / REDUCE_GRAD actions and
//             the compute around them;
//   trainer   the step: finish_grad_sync() -> grad_norm_sq() -> before_step() -> the trainer's
//             optimizer updates optimized_params() -> after_step();
//   checkpoint where its optimized tensors sit in the stage's parameters (pieces()), and its
//              own state as layout-independent chunks (state_chunks.h; the optimizer's state
//              is the optimizer's), so a checkpoint resumes under any other layout.
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
#include "loom/parallel/state_chunks.h"

namespace loom::parallel {

struct SyncContext {
  Stage* stage = nullptr;
  comm::Backend* dp = nullptr;  // size 1 when dp == 1
  const config::Config* cfg = nullptr;
};

class DataParallel : public DpHooks {
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
  // After the run's last step, before its final evaluation and checkpoint (a collective over
  // dp): modes whose replicas train apart bring them to one model.
  virtual void end_of_run() {}

  // Bytes held for the stage, the optimizer's own state excluded (the trainer adds it).
  virtual MemoryBytes memory() const { return buffer_.memory(); }
  int64_t working_bytes() const override { return buffer_.working_bytes(); }
  double exposed_wait_s() const override { return exposed_s_ + buffer_.exposed_s(); }
  void reset_exposed() {
    exposed_s_ = 0;
    buffer_.reset_exposed();
  }
  // The stage's complete parameters by name (copies). Sharded modes gather them: a collective
  // over the DP group, so every replica calls it for the same stages in the same order.
  // Empty: the stage's own tensors are complete (unsharded modes).
  virtual std::vector<NamedParam> full_params() { return {}; }
  // Per-step report line items (e.g. slim: fraction synchronized, drift); may be empty.
  virtual std::vector<std::pair<std::string, double>> step_metrics() const { return {}; }

  // ---- checkpoint (parallel/stage_state.h drives these)
  // Elements [at, at + length) of optimized_params()[tensor] are elements [begin, begin +
  // length) of the stage's parameter `param` (flattened).
  struct Piece {
    size_t tensor = 0, param = 0;
    int64_t at = 0, begin = 0, length = 0;
  };
  // Default: optimized tensor i is the stage's parameter i, whole.
  virtual std::vector<Piece> pieces() const;
  // Whether each replica trains parameters of its own (slim): its parameters and optimizer
  // state are then written per replica.
  virtual bool per_replica() const { return false; }
  // The mode's own state (none by default). load() runs before the parameters are written
  // into optimized_params(), after_load() after them.
  virtual void save(ChunkWriter&) const {}
  virtual void load(const ChunkReader&) {}
  virtual void after_load() {}
  const Stage& stage() const { return *stage_; }
  // Shape of the stage's parameter i (its tensor is empty while zero3 has it sharded).
  const std::vector<int64_t>& param_shape(size_t i) const {
    return buffer_.layout().slots[i].shape;
  }
  int dp_rank() const { return dp_->rank(); }
  int dp_size() const { return dp_->size(); }

 protected:
  std::vector<torch::Tensor> stage_tensors() const;
  // A flat vector over the (unsharded) buffer's layout as chunks "<key>/<parameter name>", and
  // back; get_flat() is false when the checkpoint holds no such state.
  void put_flat(ChunkWriter& w, const std::string& key, int replica, const float* flat) const;
  bool get_flat(const ChunkReader& r, const std::string& key, int replica, float* flat) const;

  ParamBuffer buffer_;
  Stage* stage_;
  comm::Backend* dp_;
  double exposed_s_ = 0;  // waits outside the buffer (slim, quant)
};

// Factory for --dp-mode: the one place that maps a mode's name to its class.
std::unique_ptr<DataParallel> make_data_parallel(const SyncContext& ctx);

}  // namespace loom::parallel
