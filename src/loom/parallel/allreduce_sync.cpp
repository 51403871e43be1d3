#include "loom/parallel/allreduce_sync.h"

#include "loom/common/error.h"

namespace loom::parallel {

AllReduceSync::AllReduceSync(const SyncContext& ctx) : stage_(ctx.stage), dp_(ctx.dp) {
  for (const auto& p : stage_->params()) params_.push_back(p.tensor);
  opt_ = make_optimizer(params_, ctx.cfg->train);
  const int64_t cap = std::max<int64_t>(1, int64_t(ctx.cfg->parallel.bucket_mib * (1 << 20)) / 4);
  bucket_of_.assign(params_.size(), -1);
  // Reverse parameter order: the backward produces the last parameters' gradients first.
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    int64_t n = params_[i].numel();
    if (buckets_.empty() || (buckets_.back().numel > 0 && buckets_.back().numel + n > cap))
      buckets_.emplace_back();
    buckets_.back().params.push_back(i);
    buckets_.back().numel += n;
    bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
  }
  for (auto& b : buckets_) b.flat = torch::zeros({b.numel}, torch::kFloat32);
  if (dp_->size() > 1)
    accumulators_ = on_grad_accumulated(params_, [this](int i) { on_grad_ready(i); });
}

AllReduceSync::~AllReduceSync() = default;

void AllReduceSync::on_last_backward() {
  armed_ = true;
  started_by_hooks_ = 0;
  for (auto& b : buckets_) b.ready = 0;
}

void AllReduceSync::on_grad_ready(int param) {
  if (!armed_) return;
  Bucket& b = buckets_[bucket_of_[param]];
  if (++b.ready == static_cast<int>(b.params.size()) && !b.work) {
    launch(b);
    ++started_by_hooks_;
  }
}

void AllReduceSync::launch(Bucket& b) {
  int64_t off = 0;
  for (int i : b.params) {
    auto n = params_[i].numel();
    auto slice = b.flat.narrow(0, off, n);
    const auto& g = params_[i].grad();
    if (g.defined())
      slice.copy_(g.reshape({-1}));
    else
      slice.zero_();
    off += n;
  }
  b.work = dp_->all_reduce(b.flat.data_ptr<float>(), b.numel, comm::DType::Float32);
}

void AllReduceSync::reduce_grad() {
  armed_ = false;
  if (dp_->size() == 1) return;
  for (auto& b : buckets_)
    if (!b.work) launch(b);
}

void AllReduceSync::finish() {
  if (dp_->size() == 1) return;
  const double inv = 1.0 / dp_->size();
  for (auto& b : buckets_) {
    LOOM_CHECK(b.work != nullptr, "finish() before reduce_grad() on stage ", stage_->index());
    b.work->wait();
    exposed_s_ += b.work->waited_s();
    b.work.reset();
    b.flat.mul_(inv);
    int64_t off = 0;
    for (int i : b.params) {
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
    for (auto& b : buckets_) m.grads += b.numel * 4;  // bucket buffers
  int64_t n = m.params / 4;
  m.optimizer = opt_ && dynamic_cast<torch::optim::AdamW*>(opt_.get()) ? 2 * n * 4 : n * 4;
  return m;
}

void AllReduceSync::save(torch::serialize::OutputArchive& ar) const { opt_->save(ar); }
void AllReduceSync::load(torch::serialize::InputArchive& ar) { opt_->load(ar); }

}  // namespace loom::parallel
