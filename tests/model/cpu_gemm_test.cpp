// loom's float32 CPU products (model/cpu_gemm.h) against libtorch's: linear() values and
// gradients with and without a bias, what the split backward's I asks for, second derivatives,
// gemm_into's accumulation and strides, the fallbacks, the library choice; and the attention
// core (model/attention_core.h) built on them.
#include "loom/model/cpu_gemm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "loom/common/error.h"
#include "loom/model/attention_core.h"

namespace {

using loom::config::CpuGemm;
using loom::model::cpu_gemm_in_use;
using loom::model::gemm_into;
using loom::model::use_cpu_gemm;

namespace F = torch::nn::functional;

// Each test runs once per library this machine has.
class CpuProducts : public ::testing::TestWithParam<CpuGemm> {
 protected:
  void SetUp() override {
    use_cpu_gemm(CpuGemm::Auto);
    if (GetParam() == CpuGemm::Onednn && cpu_gemm_in_use() != "onednn")
      GTEST_SKIP() << "oneDNN's float32 products need AVX-512 (BW, VL, DQ): not on this CPU";
    use_cpu_gemm(GetParam());
  }
  void TearDown() override { use_cpu_gemm(CpuGemm::Auto); }
};

// float32 rounding of sums of 64-256 products of N(0, 1) numbers.
void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(torch::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-4))
      << what << ": max difference " << (a - b).abs().max().item<float>();
}

TEST_P(CpuProducts, LinearMatchesTorchsValuesAndGradients) {
  torch::manual_seed(1);
  for (bool with_bias : {true, false}) {
    auto x = torch::randn({3, 50, 64}, torch::requires_grad());
    auto w = torch::randn({96, 64}, torch::requires_grad());
    auto b = with_bias ? torch::randn({96}, torch::requires_grad()) : torch::Tensor();
    auto gy = torch::randn({3, 50, 96});
    auto y = loom::model::linear(x, w, b);
    y.backward(gy);
    auto xr = x.detach().clone().requires_grad_(), wr = w.detach().clone().requires_grad_();
    auto br = with_bias ? b.detach().clone().requires_grad_() : torch::Tensor();
    auto yr = F::linear(xr, wr, br);
    yr.backward(gy);
    const std::string tag = with_bias ? "with bias" : "without bias";
    expect_close(y, yr, "y " + tag);
    expect_close(x.grad(), xr.grad(), "dx " + tag);
    expect_close(w.grad(), wr.grad(), "dw " + tag);
    if (with_bias) expect_close(b.grad(), br.grad(), "dbias");
  }
}

TEST_P(CpuProducts, LinearTakesNonContiguousInputsAndGradients) {
  torch::manual_seed(2);
  auto x = torch::randn({64, 40}, torch::requires_grad());  // used as x^T: [40, 64], strided
  auto w = torch::randn({32, 64}, torch::requires_grad());
  auto y = loom::model::linear(x.t(), w, {});
  auto gy = torch::randn({32, 40}).t();  // a transposed gradient
  y.backward(gy);
  auto xr = x.detach().clone().requires_grad_(), wr = w.detach().clone().requires_grad_();
  F::linear(xr.t(), wr).backward(gy);
  expect_close(y, F::linear(x.t(), w).detach(), "y");
  expect_close(x.grad(), xr.grad(), "dx");
  expect_close(w.grad(), wr.grad(), "dw");
}

TEST_P(CpuProducts, AGradientOfTheInputAloneLeavesTheWeightsAlone) {
  // What the split backward's I asks: dx and dbias, not dw (W computes it later).
  auto x = torch::randn({10, 16}, torch::requires_grad());
  auto w = torch::randn({8, 16}, torch::requires_grad());
  auto b = torch::randn({8}, torch::requires_grad());
  auto y = loom::model::linear(x, w, b);
  auto g = torch::autograd::grad({y.sum()}, {x, b});
  expect_close(g[0], torch::ones({10, 8}).mm(w.detach()), "dx");
  expect_close(g[1], torch::full({8}, 10.0f), "dbias");
  EXPECT_FALSE(w.grad().defined());
}

TEST_P(CpuProducts, SecondDerivativesAreTorchs) {
  torch::manual_seed(3);
  auto x = torch::randn({6, 12}, torch::requires_grad());
  auto w = torch::randn({5, 12}, torch::requires_grad());
  auto xr = x.detach().clone().requires_grad_(), wr = w.detach().clone().requires_grad_();
  auto gx =
      torch::autograd::grad({loom::model::linear(x, w, {}).pow(2).sum()}, {x}, {}, true, true);
  auto gxr = torch::autograd::grad({F::linear(xr, wr).pow(2).sum()}, {xr}, {}, true, true);
  gx[0].sum().backward();
  gxr[0].sum().backward();
  expect_close(w.grad(), wr.grad(), "d/dw of the sum of dx");
}

TEST_P(CpuProducts, GemmIntoAccumulatesThroughStrides) {
  torch::manual_seed(4);
  auto a = torch::randn({70, 33}), b = torch::randn({45, 70});
  auto base = torch::randn({60, 45});
  auto out = base.clone();
  auto view = out.slice(0, 10, 43);  // rows 10..42 of a larger buffer: a strided destination
  gemm_into(a.t(), b.t(), view, 1.f);
  auto expect = base.clone();
  expect.slice(0, 10, 43) += a.t().mm(b.t());
  expect_close(out, expect, "out + a^T b^T");
  gemm_into(a.t(), b.t(), view, 0.f);
  expect_close(view, a.t().mm(b.t()), "a^T b^T");
  expect_close(out.slice(0, 0, 10), base.slice(0, 0, 10), "rows outside the view");
  EXPECT_THROW(gemm_into(a.t(), b.t(), view, 0.5f), std::exception);
}

TEST_P(CpuProducts, OtherTypesGoThroughTorch) {
  auto x = torch::randn({4, 8}, torch::kBFloat16), w = torch::randn({3, 8}, torch::kBFloat16);
  EXPECT_TRUE(torch::equal(loom::model::linear(x, w, {}), F::linear(x, w)));
  auto xd = torch::randn({4, 8}, torch::kDouble), wd = torch::randn({3, 8}, torch::kDouble);
  EXPECT_TRUE(torch::equal(loom::model::linear(xd, wd, {}), F::linear(xd, wd)));
}

TEST_P(CpuProducts, AttentionCoreMatchesTorchsOps) {
  torch::manual_seed(5);
  const int64_t b = 6, t = 20, hd = 8;
  auto mask = torch::triu(torch::full({t, t}, -INFINITY), 1);
  auto q = torch::randn({b, t, hd}, torch::requires_grad()),
       k = torch::randn({b, t, hd}, torch::requires_grad()),
       v = torch::randn({b, t, hd}, torch::requires_grad());
  auto qr = q.detach().clone().requires_grad_(), kr = k.detach().clone().requires_grad_(),
       vr = v.detach().clone().requires_grad_();
  const double scale = 1.0 / std::sqrt(double(hd));
  auto y = loom::model::attention_core(q, k, v, mask, scale);
  auto yr = torch::matmul((torch::matmul(qr, kr.transpose(1, 2)) * scale + mask).softmax(-1), vr);
  expect_close(y, yr, "y");
  auto gy = torch::randn({b, t, hd});
  y.backward(gy);
  yr.backward(gy);
  expect_close(q.grad(), qr.grad(), "dq");
  expect_close(k.grad(), kr.grad(), "dk");
  expect_close(v.grad(), vr.grad(), "dv");
  // Without autograd (evaluation) the same values.
  torch::NoGradGuard no_grad;
  expect_close(loom::model::attention_core(q, k, v, mask, scale), yr.detach(), "y, no grad");
}

TEST_P(CpuProducts, AttentionCoreSecondDerivativesAreTorchs) {
  torch::manual_seed(6);
  const int64_t b = 2, t = 5, hd = 4;
  auto mask = torch::triu(torch::full({t, t}, -INFINITY), 1);
  auto q = torch::randn({b, t, hd}, torch::requires_grad());
  auto k = torch::randn({b, t, hd}), v = torch::randn({b, t, hd});
  auto qr = q.detach().clone().requires_grad_();
  auto gq = torch::autograd::grad({loom::model::attention_core(q, k, v, mask, 0.5).pow(2).sum()},
                                  {q}, {}, true, true);
  auto gqr = torch::autograd::grad(
      {torch::matmul((torch::matmul(qr, k.transpose(1, 2)) * 0.5 + mask).softmax(-1), v)
           .pow(2)
           .sum()},
      {qr}, {}, true, true);
  gq[0].pow(2).sum().backward();
  gqr[0].pow(2).sum().backward();
  expect_close(q.grad(), qr.grad(), "d/dq of |dq|^2");
}

INSTANTIATE_TEST_SUITE_P(Libraries, CpuProducts, ::testing::Values(CpuGemm::Blas, CpuGemm::Onednn),
                         [](const auto& info) { return loom::config::name_of(info.param); });

TEST(CpuGemmChoice, SaysWhichLibraryRuns) {
  use_cpu_gemm(CpuGemm::Blas);
  EXPECT_EQ(cpu_gemm_in_use(), "blas");
  use_cpu_gemm(CpuGemm::Auto);
  const std::string automatic = cpu_gemm_in_use();
  EXPECT_TRUE(automatic == "onednn" || automatic == "blas") << automatic;
  if (automatic == "blas")  // auto declines oneDNN only where it cannot run
    EXPECT_THROW(use_cpu_gemm(CpuGemm::Onednn), loom::UsageError);
  else
    EXPECT_NO_THROW(use_cpu_gemm(CpuGemm::Onednn));
  use_cpu_gemm(CpuGemm::Auto);
}

}  // namespace
