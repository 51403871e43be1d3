// loom's GELU kernel against the exact GELU in double precision, and the differentiable gelu()
// against libtorch's torch::gelu (values, gradients, second derivatives, the fallbacks).
#include "loom/model/gelu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "loom/model/gelu_kernel.h"

namespace {

double exact_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}
double exact_gelu(double x) {
  return x * exact_cdf(x);
}
double exact_derivative(double x) {
  return exact_cdf(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// Every 1/64 from -12 to 12, both ends of the range of exp, and zero; odd lengths (the tail of
// a vector loop).
std::vector<float> grid() {
  std::vector<float> x;
  for (int i = -768; i <= 768; ++i) x.push_back(float(i) / 64.0f);
  for (float v : {-200.0f, -87.0f, -13.3f, 1e-30f, -1e-30f, 0.0f, 13.3f, 200.0f}) x.push_back(v);
  return x;
}

TEST(GeluKernel, WithinTheApproximationsBoundOfTheExactValues) {
  const std::vector<float> x = grid();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), g(x.size(), 1.0f), dx(x.size());
  loom::model::gelu_forward(x.data(), y.data(), n);
  loom::model::gelu_backward(g.data(), x.data(), dx.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    // Abramowitz-Stegun's 1.5e-7 on erfc, halved in Φ, times |x|; plus float rounding.
    const double tol = 1.5e-7 * std::max(1.0, std::fabs(double(x[i])));
    EXPECT_NEAR(y[i], exact_gelu(x[i]), tol) << "x = " << x[i];
    // Φ's 0.75e-7 plus the rounding of a dozen float operations on values near 0.5: without
    // FMA (the portable clone, CPUs before AVX2) up to 2.7e-7 was measured, at x = ±0.094.
    EXPECT_NEAR(dx[i], exact_derivative(x[i]), 3.2e-7 * std::max(1.0, double(x[i]) * x[i]))
        << "x = " << x[i];
  }
  // Far left GELU is a tiny negative number, not 0 - 0 or a NaN; far right it is x.
  EXPECT_EQ(y[x.size() - 1], 200.0f);
  EXPECT_FALSE(std::isnan(y[x.size() - 8]));
}

TEST(GeluKernel, TheFarLeftTailIsNotRoundedAway) {
  // Below x = -5, 1 + erf(x/√2) in float is 0 (GELU 0); erfc(|x|/√2) keeps the tail, to the
  // approximation's relative error there (1.5% at -9).
  for (float x : {-5.0f, -6.0f, -7.0f, -9.0f}) {
    float y = 0;
    loom::model::gelu_forward(&x, &y, 1);
    EXPECT_NEAR(y / exact_gelu(x), 1.0, 0.02) << "x = " << x;
  }
}

TEST(Gelu, MatchesLibtorchValuesAndGradients) {
  torch::manual_seed(5);
  auto x = (torch::randn({7, 33}) * 3).requires_grad_();
  auto ref_x = x.detach().clone().requires_grad_();
  auto g = torch::randn({7, 33});
  auto y = loom::model::gelu(x);
  auto ref = torch::gelu(ref_x);
  EXPECT_LT((y - ref).abs().max().item<double>(), 2e-6);
  y.backward(g);
  ref.backward(g);
  EXPECT_LT((x.grad() - ref_x.grad()).abs().max().item<double>(), 2e-6);
}

TEST(Gelu, SecondDerivativeIsLibtorchs) {
  auto x = torch::linspace(-3, 3, 13).requires_grad_();
  auto dx = torch::autograd::grad({loom::model::gelu(x).sum()}, {x}, {}, /*retain_graph=*/true,
                                  /*create_graph=*/true)[0];
  auto d2 = torch::autograd::grad({dx.sum()}, {x})[0];
  auto ref_x = x.detach().clone().requires_grad_();
  auto ref_dx = torch::autograd::grad({torch::gelu(ref_x).sum()}, {ref_x}, {}, true, true)[0];
  auto ref_d2 = torch::autograd::grad({ref_dx.sum()}, {ref_x})[0];
  EXPECT_LT((d2 - ref_d2).abs().max().item<double>(), 1e-6);
}

TEST(Gelu, OtherTensorsGoToLibtorch) {
  auto x = torch::randn({4, 6}, torch::kDouble);
  EXPECT_TRUE(torch::equal(loom::model::gelu(x), torch::gelu(x)));
  auto t = torch::randn({6, 4}).t();  // not contiguous
  EXPECT_TRUE(torch::equal(loom::model::gelu(t), torch::gelu(t)));
  torch::NoGradGuard no_grad;  // no graph: the kernel, the same values as with one
  auto f = torch::randn({5});
  EXPECT_LT((loom::model::gelu(f) - torch::gelu(f)).abs().max().item<double>(), 2e-6);
}

}  // namespace
