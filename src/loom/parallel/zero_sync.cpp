#include "loom/parallel/zero_sync.h"

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

constexpr int64_t kFloat = 4;  // bytes

}  // namespace

ZeroSync::ZeroSync(const SyncContext& ctx, int level)
    : stage_(ctx.stage), dp_(ctx.dp), level_(level), d_(ctx.dp->size()), rank_(ctx.dp->rank()) {
  LOOM_CHECK(level >= 1 && level <= 3, "ZeroSync level must be 1, 2 or 3, got ", level);
  for (const auto& p : stage_->params()) params_.push_back(p.tensor);
  layout_ = FlatLayout::of(params_, d_);
  torch::Tensor flat = layout_.flatten(params_);
  shard_param_ = layout_.shard_of(flat, rank_).clone();
  shard_param_.set_requires_grad(true);
  opt_ = make_optimizer({shard_param_}, ctx.cfg->train);
  optimizer_values_ = ctx.cfg->train.optimizer == config::Optimizer::AdamW ? 2 : 1;
  if (level_ >= 2) shard_grad_ = torch::zeros({layout_.shard}, torch::kFloat32);
  if (level_ < 3) {
    full_ = flat;
    bind_params();
  } else {
    unbind_params();  // the full copy in `flat` is freed here; UNSHARD gathers it per use
  }
  if (level_ == 1) {
    ensure_grads();  // persistent, like allreduce's gradients
    if (d_ > 1) make_buckets(ctx.cfg->parallel.bucket_mib);
  }
}

ZeroSync::~ZeroSync() {
  // Normally nothing is in flight here (the trainer waits for everything). After an error, an
  // unfinished operation may still write into our buffers: leak them rather than block on a
  // peer that may never arrive.
  auto busy = [](const comm::WorkPtr& w) { return w && !w->test(); };
  bool pending = busy(gather_) || busy(scatter_);
  for (auto& w : bucket_work_) pending = pending || busy(w);
  if (pending) new std::vector<torch::Tensor>{full_, grads_, shard_grad_, shard_param_};
}

void ZeroSync::wait(comm::WorkPtr& w) {
  if (!w) return;
  w->wait();
  exposed_s_ += w->waited_s();
  w.reset();
}

// ---- parameters ---------------------------------------------------------------------------

void ZeroSync::bind_params() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(layout_.view(full_, i));
  bound_ = true;
}

void ZeroSync::unbind_params() {
  for (auto& p : params_) p.set_data(torch::empty({0}, torch::kFloat32));
  bound_ = false;
}

void ZeroSync::start_gather() {
  gather_ = dp_->all_gather(shard_param_.data_ptr<float>(), full_.data_ptr<float>(),
                            layout_.shard, comm::DType::Float32);
}

void ZeroSync::unshard() {
  if (level_ < 3 || full_.defined()) return;  // zero1/2 never shard; already (being) gathered
  // A fresh buffer each time: views of the previous one may still be referenced by autograd.
  full_ = torch::empty({layout_.padded}, torch::kFloat32);
  start_gather();
  note_working();
}

void ZeroSync::before_compute(bool backward) {
  // Schedules without UNSHARD (dp = 1 lowers no data-parallel actions, hand-written CSVs)
  // gather on demand here; normally the all-gather was started earlier and has finished.
  if (level_ == 3 && !full_.defined()) unshard();
  wait(gather_);
  if (!bound_) bind_params();
  if (backward) ensure_grads();
}

void ZeroSync::reshard() {
  if (level_ < 3 || !full_.defined()) return;
  wait(gather_);
  // Parameters now point at an empty tensor and we drop the gathered buffer. Autograd graphs
  // still in flight may keep its storage alive through views they saved (e.g. weight.t() in a
  // linear layer); that is only memory, not correctness: every gather of a step yields the
  // same values, and saved leaf parameters themselves are re-read at backward time, after the
  // next UNSHARD has pointed them at the new buffer. MemoryBytes counts our buffer only.
  unbind_params();
  full_ = torch::Tensor();
}

// ---- gradients ----------------------------------------------------------------------------

void ZeroSync::ensure_grads() {
  if (grads_.defined()) return;
  grads_ = torch::zeros({layout_.padded}, torch::kFloat32);
  // AccumulateGrad adds in place into a defined gradient (no grad mode during backward), and
  // Stage::backward_weight uses add_, so the gradients stay views of grads_.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = layout_.view(grads_, i);
  note_working();
}

void ZeroSync::release_grads() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void ZeroSync::make_buckets(double cap_mib) {
  std::vector<int64_t> numels;
  for (const auto& s : layout_.slots) numels.push_back(s.numel);
  plan_ = GradBuckets(numels, GradBuckets::cap_elements(cap_mib, kFloat));
  bucket_work_.resize(plan_.size());
  accumulators_ = on_grad_accumulated(params_, [this](int i) {
    const int b = plan_.ready(i);
    if (b >= 0 && !bucket_work_[b]) launch(b);
  });
}

void ZeroSync::on_last_backward() {
  if (level_ == 1) plan_.arm();
}

void ZeroSync::launch(int bucket) {
  // The bucket's parameters are adjacent in the flat gradient, from its lowest index on.
  const auto& b = plan_.buckets()[bucket];
  bucket_work_[bucket] =
      dp_->all_reduce(grads_.narrow(0, layout_.slots[b.params.back()].offset, b.numel));
}

void ZeroSync::reduce_grad() {
  reduce_started_ = true;
  if (level_ == 1) {
    plan_.disarm();
    for (int b = 0; b < plan_.size(); ++b)
      if (!bucket_work_[b]) launch(b);
    return;
  }
  ensure_grads();   // a stage whose backward produced nothing still takes part
  release_grads();  // grads_ itself lives until finish(): it is the reduce-scatter's input
  scatter_ = dp_->reduce_scatter(grads_.data_ptr<float>(), shard_grad_.data_ptr<float>(),
                                 layout_.shard, comm::DType::Float32);
}

void ZeroSync::finish() {
  if (!reduce_started_) reduce_grad();  // dp = 1: lowering adds no REDUCE_GRAD
  reduce_started_ = false;
  torch::NoGradGuard no_grad;
  if (level_ == 1) {
    for (auto& w : bucket_work_) wait(w);
    shard_grad_ = layout_.shard_of(grads_, rank_);
  } else {
    wait(scatter_);
    grads_ = torch::Tensor();
  }
  if (d_ > 1) shard_grad_.mul_(1.0 / d_);
}

double ZeroSync::grad_norm_sq() {
  // Shards partition the stage: every rank contributes its own, the world sum is the total.
  return shard_grad_.pow(2).sum().item<double>();
}

void ZeroSync::step(double lr, double grad_scale) {
  torch::NoGradGuard no_grad;
  wait(gather_);    // the previous all-gather reads shard_param_
  if (level_ == 3) reshard();  // a copy still gathered (dp = 1) would be stale after the update
  if (grad_scale != 1.0) shard_grad_.mul_(grad_scale);
  shard_param_.mutable_grad() = shard_grad_;
  set_lr(*opt_, lr);
  opt_->step();
  shard_param_.mutable_grad() = torch::Tensor();
  if (level_ == 1) grads_.zero_();  // the parameters' gradients are views of it
  if (level_ < 3) start_gather();   // waited for before the stage's next compute
}

// ---- accounting, checkpoints --------------------------------------------------------------

int64_t ZeroSync::working_bytes() const {
  const int64_t full = layout_.padded * kFloat;
  return (level_ == 3 && full_.defined() ? full : 0) + (level_ >= 2 && grads_.defined() ? full : 0);
}

void ZeroSync::note_working() {
  const int64_t full = layout_.padded * kFloat;
  if (level_ == 3 && full_.defined()) peak_full_ = full;
  if (level_ >= 2 && grads_.defined()) peak_grads_ = full;
  peak_working_ = std::max(peak_working_, working_bytes());
}

MemoryBytes ZeroSync::memory() const {
  const int64_t shard = layout_.shard * kFloat, full = layout_.padded * kFloat;
  MemoryBytes m;
  m.params = level_ < 3 ? full + shard : shard + peak_full_;
  m.grads = level_ == 1 ? full : shard + peak_grads_;
  m.optimizer = optimizer_values_ * shard;
  m.working = peak_working_;
  return m;
}

std::vector<NamedParam> ZeroSync::full_params() {
  torch::Tensor flat = full_;
  if (flat.defined()) {
    wait(gather_);
  } else {  // zero3 between uses: gather a temporary copy (collective over the DP group)
    flat = torch::empty({layout_.padded}, torch::kFloat32);
    comm::WorkPtr w = dp_->all_gather(shard_param_.data_ptr<float>(), flat.data_ptr<float>(),
                                      layout_.shard, comm::DType::Float32);
    wait(w);
  }
  std::vector<NamedParam> out;
  const auto& named = stage_->params();
  for (size_t i = 0; i < named.size(); ++i)
    out.push_back({named[i].name, layout_.view(flat, i).clone()});
  return out;
}

void ZeroSync::save(torch::serialize::OutputArchive& ar) const {
  ar.write("zero.layout", torch::tensor({layout_.numel, layout_.padded, int64_t(d_)}, torch::kInt64));
  ar.write("zero.shard", shard_param_.detach());
  torch::serialize::OutputArchive sub;
  opt_->save(sub);
  ar.write("optimizer", sub);
}

void ZeroSync::load(torch::serialize::InputArchive& ar) {
  torch::Tensor lay, shard;
  ar.read("zero.layout", lay);
  if (lay.numel() != 3 || lay[0].item<int64_t>() != layout_.numel || lay[2].item<int64_t>() != d_)
    LOOM_USAGE("checkpoint of stage ", stage_->index(), " holds ", lay[0].item<int64_t>(),
               " parameters in ", lay[2].item<int64_t>(), " shards, but this run has ",
               layout_.numel, " in ", d_, "; resume with the same model and dp");
  ar.read("zero.shard", shard);
  {
    torch::NoGradGuard no_grad;
    wait(gather_);
    shard_param_.copy_(shard);
  }
  torch::serialize::InputArchive sub;
  ar.read("optimizer", sub);
  opt_->load(sub);
  if (level_ < 3) {  // rebuild the full parameters from every rank's loaded shard
    start_gather();
    wait(gather_);
  } else {
    reshard();
  }
}

}  // namespace loom::parallel
