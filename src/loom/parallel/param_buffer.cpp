#include "loom/parallel/param_buffer.h"

#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>
#include <functional>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

constexpr int64_t kFloat = 4;  // bytes

class AfterAccumulate : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

// Calls on_ready(i) each time params[i]'s AccumulateGrad has added a gradient (so, in the last
// micro-batch's backward, when that gradient is final). The hooks live on the accumulator
// nodes, which a parameter holds only weakly: keep the returned nodes as long as the hooks.
std::vector<std::shared_ptr<torch::autograd::Node>> on_grad_accumulated(
    const std::vector<torch::Tensor>& params, const std::function<void(int)>& on_ready) {
  std::vector<std::shared_ptr<torch::autograd::Node>> nodes;
  for (size_t i = 0; i < params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    const int idx = static_cast<int>(i);
    acc->add_post_hook(std::make_unique<AfterAccumulate>([on_ready, idx] { on_ready(idx); }));
    nodes.push_back(std::move(acc));
  }
  return nodes;
}

}  // namespace

ParamBuffer::ParamBuffer(Stage& stage, comm::Backend& dp, const BufferOptions& o)
    : dp_(dp),
      sharded_(o.sharded),
      transient_grads_(o.transient_grads),
      transient_params_(o.transient_params),
      d_(dp.size()),
      rank_(dp.rank()),
      options_(stage.options(torch::kFloat32)),
      bf16_reduce_(o.bf16_reduce) {
  LOOM_CHECK(sharded_ || !transient_grads_, "transient gradients need a sharded buffer");
  LOOM_CHECK(transient_grads_ || !transient_params_,
             "transient parameters need transient gradients");
  LOOM_CHECK(!(o.buckets && transient_grads_), "buckets reduce persistent gradients only");
  bool replicated_on_tp = false;
  for (const auto& p : stage.params()) {
    tensors_.push_back(p.tensor);
    // A parameter replicated on a tensor-parallel group is counted once in the global norm.
    norm_weight_.push_back(p.tp_part < 0 && p.tp_parts > 1 ? 1.0 / p.tp_parts : 1.0);
    replicated_on_tp |= norm_weight_.back() != 1.0;
  }
  if (!replicated_on_tp) norm_weight_.clear();  // grad_sq_sum() takes the plain sum
  layout_ = FlatLayout::of(tensors_, sharded_ ? d_ : 1);
  torch::Tensor flat = layout_.flatten(tensors_);
  if (sharded_) {
    master_ = layout_.shard_of(flat, rank_).clone();
    master_.set_requires_grad(true);  // the optimizer reads master_.grad()
  }
  if (transient_grads_) shard_grads_ = torch::zeros({layout_.shard}, options_);
  if (transient_params_) {
    unbind_params();  // the full copy in `flat` is freed here; start_param_sync() gathers it
  } else {
    params_ = flat;
    bind_params();
  }
  if (!transient_grads_) ensure_grads();  // persistent, filled in place by autograd
  if (o.buckets) {
    std::vector<int64_t> numels;
    for (const auto& s : layout_.slots) numels.push_back(s.numel);
    plan_ = GradBuckets(numels, GradBuckets::cap_elements(o.bucket_mib, kFloat));
    bucket_work_.resize(plan_.size());
    bucket_bf16_.resize(plan_.size());
    if (d_ > 1)
      accumulators_ = on_grad_accumulated(tensors_, [this](int i) {
        const int b = plan_.ready(i);
        if (b >= 0 && !bucket_work_[b]) {
          launch(b);
          ++started_by_hooks_;
        }
      });
  }
}

ParamBuffer::~ParamBuffer() {
  // Normally nothing is in flight here (the trainer waits for everything). After an error, an
  // unfinished operation may still write into our buffers: leak them rather than block on a
  // peer that may never arrive.
  auto busy = [](const comm::WorkPtr& w) { return w && !w->test(); };
  bool pending = busy(gather_) || busy(scatter_);
  for (auto& w : bucket_work_) pending = pending || busy(w);
  if (pending) {
    std::vector<torch::Tensor> all = {params_, grads_,      shard_grads_,
                                      master_, grads_bf16_, shard_bf16_};
    all.insert(all.end(), bucket_bf16_.begin(), bucket_bf16_.end());
    new std::vector<torch::Tensor>(std::move(all));
  }
}

void ParamBuffer::wait(comm::WorkPtr& w) {
  if (!w) return;
  w->wait();
  exposed_s_ += w->waited_s();
  w.reset();
}

// ---- gradients ----------------------------------------------------------------------------

void ParamBuffer::ensure_grads() {
  if (grads_.defined()) return;
  grads_ = torch::zeros({layout_.padded}, options_);
  // AccumulateGrad adds in place into a defined gradient (no grad mode during backward), and
  // Stage::backward_weight uses add_, so the gradients stay views of grads_.
  for (size_t i = 0; i < tensors_.size(); ++i) tensors_[i].mutable_grad() = layout_.view(grads_, i);
  if (!transient_grads_) shard_grads_ = sharded_ ? layout_.shard_of(grads_, rank_) : grads_;
  note_working();
}

void ParamBuffer::arm() {
  plan_.arm();
  started_by_hooks_ = 0;
}

void ParamBuffer::launch(int bucket) {
  // The bucket's parameters are adjacent in the flat gradient, from its lowest index on.
  const auto& b = plan_.buckets()[bucket];
  torch::Tensor range = grads_.narrow(0, layout_.slots[b.params.back()].offset, b.numel);
  if (bf16_reduce_) range = bucket_bf16_[bucket] = range.to(torch::kBFloat16);
  bucket_work_[bucket] = dp_.all_reduce(range);
}

void ParamBuffer::start_grad_sync() {
  grad_sync_started_ = true;
  if (transient_grads_) {
    ensure_grads();  // a stage whose backward produced nothing still takes part
    for (auto& t : tensors_) t.mutable_grad() = torch::Tensor();  // grads_ lives until finish
    if (bf16_reduce_) {
      grads_bf16_ = grads_.to(torch::kBFloat16);
      shard_bf16_ = torch::empty({layout_.shard}, grads_bf16_.options());
      scatter_ = dp_.reduce_scatter(grads_bf16_, shard_bf16_);
    } else {
      scatter_ = dp_.reduce_scatter(grads_, shard_grads_);
    }
    return;
  }
  plan_.disarm();
  if (d_ == 1) return;
  for (int b = 0; b < plan_.size(); ++b)
    if (!bucket_work_[b]) launch(b);
}

void ParamBuffer::finish_grad_sync() {
  if (!grad_sync_started_) start_grad_sync();  // dp = 1: lowering adds no REDUCE_GRAD
  grad_sync_started_ = false;
  torch::NoGradGuard no_grad;
  for (int b = 0; b < static_cast<int>(bucket_work_.size()); ++b) {
    wait(bucket_work_[b]);
    if (bucket_bf16_[b].defined()) {
      const auto& bucket = plan_.buckets()[b];
      grads_.narrow(0, layout_.slots[bucket.params.back()].offset, bucket.numel)
          .copy_(bucket_bf16_[b]);
      bucket_bf16_[b] = torch::Tensor();
    }
  }
  if (transient_grads_) {
    wait(scatter_);
    if (shard_bf16_.defined()) shard_grads_.copy_(shard_bf16_);
    grads_ = grads_bf16_ = shard_bf16_ = torch::Tensor();
  }
  if (d_ > 1) shard_grads_.mul_(1.0 / d_);
  if (sharded_) master_.mutable_grad() = shard_grads_;
}

void ParamBuffer::zero_grads() {
  if (grads_.defined() && !transient_grads_) grads_.zero_();
}

double ParamBuffer::grad_sq_sum() const {
  if (!shard_grads_.defined()) return 0.0;
  if (norm_weight_.empty()) return shard_grads_.pow(2).sum().item<double>();
  const int64_t lo = sharded_ ? int64_t(rank_) * layout_.shard : 0, hi = lo + shard_grads_.numel();
  torch::Tensor sum = torch::zeros({}, options_.dtype(torch::kFloat64));  // one read at the end
  for (size_t i = 0; i < layout_.slots.size(); ++i) {
    const auto& s = layout_.slots[i];
    const int64_t from = std::max(lo, s.offset), to = std::min(hi, s.offset + s.numel);
    if (from < to) sum += norm_weight_[i] * shard_grads_.slice(0, from - lo, to - lo).pow(2).sum();
  }
  return sum.item<double>();
}

// ---- parameters ---------------------------------------------------------------------------

void ParamBuffer::bind_params() {
  for (size_t i = 0; i < tensors_.size(); ++i) tensors_[i].set_data(layout_.view(params_, i));
  bound_ = true;
}

void ParamBuffer::unbind_params() {
  for (auto& t : tensors_) t.set_data(torch::empty({0}, options_));
  bound_ = false;
}

void ParamBuffer::start_param_sync() {
  LOOM_CHECK(sharded_, "parameter sync needs a sharded buffer");
  if (transient_params_) {
    if (params_.defined()) return;  // already (being) gathered
    // A fresh buffer each time: views of the previous one may still be referenced by autograd.
    params_ = torch::empty({layout_.padded}, options_);
  }
  gather_ = dp_.all_gather(master_.detach(), params_);
  note_working();
}

void ParamBuffer::finish_param_sync() {
  wait(gather_);
  if (params_.defined() && !bound_) bind_params();
}

void ParamBuffer::drop_params() {
  if (!transient_params_ || !params_.defined()) return;
  wait(gather_);
  // Parameters now point at an empty tensor and we drop the gathered buffer. Autograd graphs
  // still in flight may keep its storage alive through views they saved (e.g. weight.t() in a
  // linear layer); that is only memory, not correctness: every gather of a step yields the
  // same values, and saved leaf parameters themselves are re-read at backward time, after the
  // next gather has pointed them at the new buffer. memory() counts our buffer only.
  unbind_params();
  params_ = torch::Tensor();
}

torch::Tensor ParamBuffer::gathered_copy() {
  if (params_.defined()) {
    wait(gather_);
    return params_;
  }
  torch::Tensor flat = torch::empty({layout_.padded}, options_);
  comm::WorkPtr w = dp_.all_gather(master_.detach(), flat);
  wait(w);
  return flat;
}

// ---- accounting ---------------------------------------------------------------------------

int64_t ParamBuffer::working_bytes() const {
  const int64_t full = layout_.padded * kFloat;
  return (transient_params_ && params_.defined() ? full : 0) +
         (transient_grads_ && grads_.defined() ? full : 0);
}

void ParamBuffer::note_working() {
  const int64_t full = layout_.padded * kFloat;
  if (transient_params_ && params_.defined()) peak_params_ = full;
  if (transient_grads_ && grads_.defined()) peak_grads_ = full;
  peak_working_ = std::max(peak_working_, working_bytes());
}

MemoryBytes ParamBuffer::memory() const {
  const int64_t shard = layout_.shard * kFloat, full = layout_.padded * kFloat;
  MemoryBytes m;
  if (!sharded_) {
    m.params = m.grads = full;
    return m;
  }
  m.params = transient_params_ ? shard + peak_params_ : full + shard;  // + master shard
  m.grads = transient_grads_ ? shard + peak_grads_ : full;             // shard: a view
  m.working = peak_working_;
  return m;
}

}  // namespace loom::parallel
