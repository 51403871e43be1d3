#include "loom/parallel/diloco_sync.h"

#include "loom/common/error.h"

namespace loom::parallel {

DilocoSync::DilocoSync(const SyncContext& ctx)
    : DataParallel(ctx, BufferOptions{}), cfg_(ctx.cfg->diloco) {
  global_ = buffer_.params().detach().clone();  // every replica built the same parameters
  momentum_ = torch::zeros_like(global_);
}

void DilocoSync::after_step() {
  buffer_.zero_grads();  // the trainer's optimizer has made the replica's own step
  ++steps_;
  bytes_ = outer_ = 0;
  if (steps_ % cfg_.inner_steps == 0) outer_step();
}

void DilocoSync::outer_step() {
  torch::NoGradGuard no_grad;
  const torch::Tensor& w = buffer_.params();
  torch::Tensor delta = global_ - w;
  if (dp_->size() > 1) {
    const comm::Stats before = dp_->stats();
    comm::WorkPtr work = dp_->all_reduce(delta);
    work->wait();
    exposed_s_ += work->waited_s();
    bytes_ = double((dp_->stats() - before).total_bytes());
    delta.div_(dp_->size());
  }
  const double mu = cfg_.outer_momentum;
  if (mu > 0) {
    momentum_.mul_(mu).add_(delta);
    global_.sub_(cfg_.nesterov ? delta.add(momentum_, mu) : momentum_, cfg_.outer_lr);
  } else {
    global_.sub_(delta, cfg_.outer_lr);
  }
  w.copy_(global_);
  outer_ = 1;
}

MemoryBytes DilocoSync::memory() const {
  MemoryBytes m = buffer_.memory();     // the replica's parameters and gradients
  m.params += global_.numel() * 4;      // g
  m.optimizer = momentum_.numel() * 4;  // the outer momentum (the inner optimizer: the trainer)
  return m;
}

void DilocoSync::save(ChunkWriter& w) const {
  const torch::Tensor g = global_.cpu(), m = momentum_.cpu();
  put_flat(w, "diloco.global", -1, g.data_ptr<float>());
  put_flat(w, "diloco.momentum", -1, m.data_ptr<float>());
  w.put("diloco.steps", -1, 0, {1}, torch::tensor({steps_}, torch::kInt64));
}

void DilocoSync::load(const ChunkReader& r) {
  torch::Tensor g = torch::empty({global_.numel()}, torch::kFloat32);
  fresh_ = !get_flat(r, "diloco.global", -1, g.data_ptr<float>());
  if (fresh_) return;  // another mode's checkpoint: after_load() starts afresh
  torch::Tensor m = torch::empty_like(g), steps = torch::zeros({1}, torch::kInt64);
  if (!get_flat(r, "diloco.momentum", -1, m.data_ptr<float>()) ||
      !r.get("diloco.steps", -1, 0, steps))
    LOOM_USAGE(
        "checkpoint holds diloco.global but not diloco.momentum or diloco.steps; it is "
        "incomplete");
  global_.copy_(g);
  momentum_.copy_(m);
  steps_ = steps.item<int64_t>();
}

void DilocoSync::after_load() {
  if (!fresh_) return;
  global_.copy_(buffer_.params());
  momentum_.zero_();
  steps_ = 0;
}

std::vector<std::pair<std::string, double>> DilocoSync::step_metrics() const {
  return {{"diloco_bytes", bytes_}, {"diloco_outer", outer_}};
}

}  // namespace loom::parallel
