#include "loom/model/linear_uses.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <unordered_map>
#include <unordered_set>

#include "loom/common/error.h"
#include "loom/model/autocast_linear.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/tensor_parallel.h"

namespace loom::model {
namespace {

thread_local std::vector<LinearUse>* recording = nullptr;

// Where autograd delivers t's gradient (as torch::autograd::grad finds it): its grad_fn, or a
// leaf's accumulator; a leaf no graph reaches gets an edge nothing flows into (no gradient).
torch::autograd::Edge gradient_edge_of(const torch::Tensor& t) {
  if (t.grad_fn()) return torch::autograd::impl::gradient_edge(t);
  if (auto acc = torch::autograd::impl::try_get_grad_accumulator(t)) return {acc, 0};
  return {std::make_shared<torch::autograd::Identity>(), 0};
}

// A gradient kept for W that is a slice of a larger buffer (a Llama's v: a slice of the
// gradient of q, k and v concatenated, whose q and k parts the rotary backward has copied)
// would keep the whole buffer until W. Where the slices kept of a buffer are smaller than it,
// each is copied out, so that the buffer goes when I is done.
void copy_out_slices(std::vector<torch::Tensor>& dys) {
  std::unordered_map<const void*, int64_t> kept;  // buffer -> bytes of its slices kept
  for (const auto& dy : dys)
    if (dy.defined()) kept[dy.storage().unsafeGetStorageImpl()] += dy.nbytes();
  for (auto& dy : dys)
    if (dy.defined() && kept[dy.storage().unsafeGetStorageImpl()] < int64_t(dy.storage().nbytes()))
      dy = dy.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

RecordLinearUses::RecordLinearUses(std::vector<LinearUse>* into) : previous_(recording) {
  recording = into;
}

RecordLinearUses::~RecordLinearUses() {
  recording = previous_;
}

torch::Tensor apply_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  // Under autocast the product's own input is x cast (W keeps that, not the float32 x).
  const torch::Tensor in = autocast_product(x, weight) ? x.to(product_type(x)) : x;
  torch::Tensor y = linear(in, weight, bias);
  record_linear_use(in, weight, y);
  return y;
}

void record_linear_use(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& y,
                       comm::Backend* gather) {
  // x without its history: W needs its values only, and x's grad_fn would hold the graph
  // behind it, down to the stage input's accumulator, which holds the input, until W.
  if (recording && weight.requires_grad() && torch::GradMode::is_enabled())
    recording->push_back({x.detach(), weight, torch::autograd::impl::gradient_edge(y), gather});
}

void accumulate_grad(const torch::Tensor& p, const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  torch::Tensor& grad = p.mutable_grad();
  if (grad.defined())
    grad.add_(g);
  else
    grad = g.to(p.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

torch::Tensor SplitBackward::input_grad(const torch::Tensor& output,
                                        const torch::Tensor& grad_output,
                                        const torch::Tensor& input,
                                        const std::vector<torch::Tensor>& params) {
  LOOM_CHECK(!input_done_, "a micro-batch's I twice");
  input_done_ = true;
  std::unordered_set<const void*> recorded;
  for (const auto& u : uses) recorded.insert(u.weight.unsafeGetTensorImpl());
  torch::autograd::edge_list wrt;
  std::vector<torch::Tensor> own;
  if (input.defined()) wrt.push_back(gradient_edge_of(input));
  for (const auto& p : params)
    if (p.requires_grad() && !recorded.count(p.unsafeGetTensorImpl())) {
      wrt.push_back(gradient_edge_of(p));
      own.push_back(p);
    }
  for (const auto& u : uses) wrt.push_back(u.y);
  torch::Tensor dx;
  if (!wrt.empty()) {
    // torch::autograd::grad without its tensors: the recorded outputs are edges.
    LOOM_CHECK(grad_output.defined() || output.numel() == 1,
               "I of a non-scalar output without its gradient");
    const torch::Tensor g = grad_output.defined() ? grad_output : torch::ones_like(output);
    auto grads = torch::autograd::Engine::get_default_engine().execute(
        {torch::autograd::impl::gradient_edge(output)}, {g}, /*keep_graph=*/false,
        /*create_graph=*/false, /*accumulate_grad=*/false, wrt);
    size_t k = 0;
    if (input.defined()) dx = grads[k++];
    for (const auto& p : own) {
      const torch::Tensor& gp = grads[k++];
      if (gp.defined()) accumulate_grad(p, gp);
    }
    dys_.assign(grads.begin() + static_cast<std::ptrdiff_t>(k), grads.end());
    copy_out_slices(dys_);
  }
  for (auto& u : uses) u.y = {};  // I is done with the outputs' edges
  return dx;
}

void SplitBackward::weight_grads() {
  LOOM_CHECK(input_done_, "a micro-batch's W before its I");
  torch::NoGradGuard no_grad;
  // Parts gathered whole once for the products that share them (q, k and v; gate and up),
  // each freed after its last product: one whole input at a time, not every one of the stage.
  std::unordered_map<const void*, torch::Tensor> gathered;
  std::unordered_map<const void*, size_t> last_use;
  for (size_t k = 0; k < uses.size(); ++k)
    if (uses[k].gather && dys_[k].defined()) last_use[uses[k].x.unsafeGetTensorImpl()] = k;
  auto input_of = [&](const LinearUse& u) {
    if (!u.gather) return u.x;
    torch::Tensor& whole = gathered[u.x.unsafeGetTensorImpl()];
    if (!whole.defined()) whole = gather_sequence(u.x, *u.gather);
    return whole;
  };
  for (size_t k = 0; k < uses.size(); ++k) {
    const torch::Tensor& dy = dys_[k];
    if (!dy.defined()) continue;  // the product did not reach the output
    const LinearUse& u = uses[k];
    const int64_t out = dy.size(-1), in = u.x.size(-1);
    // dy^T x over every leading dimension: the product autograd makes for a linear's weight,
    // added straight into a gradient of the same type.
    const torch::Tensor dyt = dy.reshape({-1, out}).t(),
                        x = input_of(u).reshape({-1, in}).to(dy.scalar_type());
    const torch::Tensor& grad = u.weight.grad();
    if (grad.defined() && grad.scalar_type() == dy.scalar_type()) {
      gemm_into(dyt, x, grad, 1.f);
    } else {
      torch::Tensor g = torch::empty({out, in}, dy.options());
      gemm_into(dyt, x, g, 0.f);
      accumulate_grad(u.weight, g);
    }
    if (u.gather && last_use[u.x.unsafeGetTensorImpl()] == k)
      gathered.erase(u.x.unsafeGetTensorImpl());
  }
  uses.clear();
  dys_.clear();
}

int64_t SplitBackward::held_bytes() const {
  std::unordered_set<const void*> seen;
  int64_t n = 0;
  for (const auto& u : uses)
    if (seen.insert(u.x.storage().unsafeGetStorageImpl()).second) n += u.x.storage().nbytes();
  for (const auto& dy : dys_)
    if (dy.defined() && seen.insert(dy.storage().unsafeGetStorageImpl()).second)
      n += dy.storage().nbytes();
  return n;
}

}  // namespace loom::model
