#include "loom/parallel/allreduce_sync.h"

#include "loom/common/error.h"

namespace loom::parallel {

AllReduceSync::AllReduceSync(const SyncContext& ctx) : stage_(ctx.stage), dp_(ctx.dp) {
  for (const auto& p : stage_->params()) params_.push_back(p.tensor);
  opt_ = make_optimizer(params_, ctx.cfg->train);
  std::vector<int64_t> numels;
  for (const auto& p : params_) numels.push_back(p.numel());
  plan_ = GradBuckets(numels, GradBuckets::cap_elements(ctx.cfg->parallel.bucket_mib, 4));
  for (const auto& b : plan_.buckets())
    buckets_.push_back({torch::zeros({b.numel}, torch::kFloat32), nullptr});
  if (dp_->size() > 1)
    accumulators_ = on_grad_accumulated(params_, [this](int i) {
      const int b = plan_.ready(i);
      if (b >= 0 && !buckets_[b].work) {
        launch(b);
        ++started_by_hooks_;
      }
    });
}

AllReduceSync::~AllReduceSync() = default;

void AllReduceSync::on_last_backward() {
  plan_.arm();
  started_by_hooks_ = 0;
}

void AllReduceSync::launch(int index) {
  Bucket& b = buckets_[index];
  int64_t off = 0;
  for (int i : plan_.buckets()[index].params) {
    auto n = params_[i].numel();
    auto slice = b.flat.narrow(0, off, n);
    const auto& g = params_[i].grad();
    if (g.defined())
      slice.copy_(g.reshape({-1}));
    else
      slice.zero_();
    off += n;
  }
  b.work = dp_->all_reduce(b.flat);
}

void AllReduceSync::reduce_grad() {
  plan_.disarm();
  if (dp_->size() == 1) return;
  for (int b = 0; b < plan_.size(); ++b)
    if (!buckets_[b].work) launch(b);
}

void AllReduceSync::finish() {
  if (dp_->size() == 1) return;
  const double inv = 1.0 / dp_->size();
  for (int index = 0; index < plan_.size(); ++index) {
    Bucket& b = buckets_[index];
    LOOM_CHECK(b.work != nullptr, "finish() before reduce_grad() on stage ", stage_->index());
    b.work->wait();
    exposed_s_ += b.work->waited_s();
    b.work.reset();
    b.flat.mul_(inv);
    int64_t off = 0;
    for (int i : plan_.buckets()[index].params) {
      auto& p = params_[i];
      auto n = p.numel();
      auto avg = b.flat.narrow(0, off, n).view(p.sizes());
      // A view of the bucket: valid until the next step's launch() refills it, and the
      // optimizer step drops the gradients before that (scaled_step).
      p.mutable_grad() = avg;
      off += n;
    }
  }
}

double AllReduceSync::grad_norm_sq() {
  // Every replica holds the same averaged gradients: only dp rank 0 contributes, so that the
  // world-wide sum is the squared norm of the full model's gradient.
  if (dp_->rank() != 0) return 0;
  return grad_sq_sum(params_);
}

void AllReduceSync::step(double lr, double grad_scale) {
  scaled_step(*opt_, params_, lr, grad_scale);
}

MemoryBytes AllReduceSync::memory() const {
  MemoryBytes m;
  for (auto& p : params_) m.params += p.numel() * 4;
  m.grads = m.params;
  if (dp_->size() > 1)
    for (auto& b : plan_.buckets()) m.grads += b.numel * 4;  // bucket buffers
  int64_t n = m.params / 4;
  m.optimizer = opt_ && dynamic_cast<torch::optim::AdamW*>(opt_.get()) ? 2 * n * 4 : n * 4;
  return m;
}

void AllReduceSync::save(torch::serialize::OutputArchive& ar) const { opt_->save(ar); }
void AllReduceSync::load(torch::serialize::InputArchive& ar) { opt_->load(ar); }

}  // namespace loom::parallel
