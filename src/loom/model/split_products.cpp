#include "loom/model/split_products.h"

#include <optional>

#include "loom/comm/backend.h"
#include "loom/common/error.h"
#include "loom/model/autocast_linear.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/linear_uses.h"

namespace loom::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Autograd contexts keep only IValues: the group travels as its address (it outlives every
// graph: the trainer's mesh owns it).
comm::Backend& group_at(int64_t address) {
  return *reinterpret_cast<comm::Backend*>(address);  // NOLINT(performance-no-int-to-ptr)
}

bool has_bias(int64_t biased, size_t i) {
  return ((biased >> i) & 1) != 0;
}

struct GatheredProducts : torch::autograd::Function<GatheredProducts> {
  // x: this rank's part of the sequence (its gradient's edge and type); part: x in the
  // products' type, without a graph (kept); params: the n weights, then the defined biases
  // (bit i of biased: product i has one).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& part, int64_t comm, int64_t n, int64_t biased,
                               at::TensorList params) {
    const torch::Tensor whole = gather_sequence(part, group_at(comm));
    variable_list ys;
    size_t next_bias = static_cast<size_t>(n);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i)
      ys.push_back(
          linear(whole, params[i], has_bias(biased, i) ? params[next_bias++] : at::Tensor()));
    std::vector<torch::Tensor> kept = {part};
    kept.insert(kept.end(), params.begin(), params.begin() + n);
    ctx->save_for_backward(kept);
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["biased"] = biased;
    ctx->saved_data["type"] = static_cast<int64_t>(x.scalar_type());
    return ys;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    LOOM_CHECK(!torch::GradMode::is_enabled(),
               "sequence-parallel products have no second derivative");
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& part = saved[0];
    const size_t n = saved.size() - 1;
    comm::Backend& group = group_at(ctx->saved_data["comm"].toInt());
    const int64_t biased = ctx->saved_data["biased"].toInt();
    const auto x_type = static_cast<at::ScalarType>(ctx->saved_data["type"].toInt());
    // Edges: x 0, part 1, the weights from 2, then the biases.
    bool want_w = false;
    for (size_t i = 0; i < n; ++i) want_w = want_w || ctx->needs_input_grad(2 + i);
    std::optional<SequenceGather> gathering;
    if (want_w) gathering.emplace(part, group);  // hidden behind the input-gradient products

    const int64_t b = part.size(0), s = part.size(1) * group.size(), in = part.size(2);
    std::vector<torch::Tensor> dys;
    for (size_t i = 0; i < n; ++i) dys.push_back(grads[i].contiguous().reshape({b * s, -1}));
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      // The sum of dy_i w_i over the products, in x's type (a bf16 product's gradient is
      // widened before the sum, as autograd does at a cast), then this rank's part of it.
      torch::Tensor sum;
      for (size_t i = 0; i < n; ++i) {
        const torch::Tensor w = saved[1 + i].to(dys[i].scalar_type());
        if (dys[i].scalar_type() == x_type) {
          if (!sum.defined()) sum = torch::empty({b * s, in}, dys[i].options());
          gemm_into(dys[i], w, sum, i == 0 ? 0.f : 1.f);
        } else {
          const torch::Tensor p = dys[i].mm(w).to(x_type);
          sum = sum.defined() ? sum.add_(p) : p;
        }
      }
      dx = scatter_sequence_sum(sum.view({b, s, in}), group);
    }
    variable_list out = {dx, {}, {}, {}, {}};  // x, part, comm, n, biased
    torch::Tensor whole;
    if (gathering) whole = gathering->wait().reshape({b * s, in});
    for (size_t i = 0; i < n; ++i) {
      torch::Tensor dw;
      if (ctx->needs_input_grad(2 + i)) {
        dw = torch::empty({dys[i].size(1), in}, dys[i].options());
        gemm_into(dys[i].t(), whole.to(dys[i].scalar_type()), dw, 0.f);
      }
      out.push_back(dw);
    }
    size_t edge = 2 + n;
    for (size_t i = 0; i < n; ++i)
      if (has_bias(biased, i))
        out.push_back(ctx->needs_input_grad(edge++) ? dys[i].sum(0) : at::Tensor());
    return out;
  }
};

}  // namespace

std::vector<torch::Tensor> split_products(const torch::Tensor& x,
                                          const std::vector<LinearWeights>& products,
                                          const TensorParallel& tp, bool record) {
  std::vector<torch::Tensor> ys;
  if (tp.size == 1 || !tp.sequence) {
    // Cast once for all the products (each would keep its own bf16 copy under autocast).
    const torch::Tensor whole = enter_split(x, tp);
    const torch::Tensor in = whole.to(product_type(whole));
    for (const LinearWeights& p : products)
      ys.push_back(record ? apply_linear(in, p.weight, p.bias) : linear(in, p.weight, p.bias));
    return ys;
  }
  LOOM_CHECK(tp.comm != nullptr, "tensor parallelism without a communicator");
  LOOM_CHECK(products.size() < 63, "too many products of one input");
  std::vector<torch::Tensor> params;
  int64_t biased = 0;
  for (size_t i = 0; i < products.size(); ++i) {
    params.push_back(products[i].weight);
    if (products[i].bias.defined()) biased |= int64_t(1) << i;
  }
  for (const LinearWeights& p : products)
    if (p.bias.defined()) params.push_back(p.bias);
  const torch::Tensor part = x.detach().to(product_type(x));
  ys = GatheredProducts::apply(x, part, reinterpret_cast<int64_t>(tp.comm),
                               static_cast<int64_t>(products.size()), biased,
                               at::TensorList(params));
  if (record)
    for (size_t i = 0; i < products.size(); ++i)
      record_linear_use(part, products[i].weight, ys[i], tp.comm);
  return ys;
}

}  // namespace loom::model
