// cpu_gemm: loom's float32 CPU products through libtorch's BLAS and through oneDNN
// (model/cpu_gemm.h), on the shapes of the byte-level GPT the peers' comparison trains (width
// 256, context 128; micro-batches of 4 and 16 samples): each linear layer's forward, input
// gradient and weight gradient, and the attention core forward and backward. Prints GFLOP/s
// per library and their ratio, one thread, alternating the libraries (ABBA) so that a drift
// of this VM's speed hits both.
//
// usage: cpu_gemm [--seconds S]   (S per measurement, default 0.3)
#include "loom/model/cpu_gemm.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "loom/config/config.h"
#include "loom/model/attention_core.h"

namespace {

using loom::config::CpuGemm;

double seconds_per_call(const std::function<void()>& f, double budget) {
  f();
  int n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  while (el < budget) {
    f();
    ++n;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return el / n;
}

struct Case {
  std::string name;
  double flops;
  std::function<void()> run;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t d = 256, t = 128, heads = 4, hd = d / heads;
  for (int64_t b : {4, 16}) {
    const int64_t m = b * t;
    for (auto [k, n, what] : {std::tuple<int64_t, int64_t, const char*>{d, 3 * d, "qkv"},
                              {d, d, "proj"},
                              {d, 4 * d, "fc"},
                              {4 * d, d, "out"}}) {
      auto x = torch::randn({m, k}), w = torch::randn({n, k}), dy = torch::randn({m, n});
      auto dx = torch::empty({m, k}), dw = torch::empty({n, k});
      const double f = 2.0 * m * n * k;
      const std::string tag = std::string(what) + " b" + std::to_string(b);
      out.push_back({tag + " forward", f, [=] { loom::model::linear(x, w, {}); }});
      out.push_back({tag + " dx", f, [=] { loom::model::gemm_into(dy, w, dx, 0.f); }});
      out.push_back({tag + " dw", f, [=] { loom::model::gemm_into(dy.t(), x, dw, 1.f); }});
    }
    auto q = torch::randn({b * heads, t, hd}, torch::requires_grad()),
         k = torch::randn({b * heads, t, hd}, torch::requires_grad()),
         v = torch::randn({b * heads, t, hd}, torch::requires_grad());
    auto mask = torch::triu(torch::full({t, t}, -INFINITY), 1);
    auto dy = torch::randn({b * heads, t, hd});
    // Forward: q k^T and att v; backward: four such products.
    out.push_back(
        {"attention b" + std::to_string(b) + " fwd+bwd", 6.0 * 2.0 * b * heads * t * t * hd, [=] {
           auto y = loom::model::attention_core(q, k, v, mask, 0.125);
           torch::autograd::grad({y}, {q, k, v}, {dy});
         }});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 0.3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      budget = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: cpu_gemm [--seconds S]\n");
      return 2;
    }
  }
  torch::set_num_threads(1);
  loom::model::use_cpu_gemm(CpuGemm::Auto);
  if (loom::model::cpu_gemm_in_use() != "onednn") {
    std::printf(
        "oneDNN's float32 products cannot run on this CPU (no AVX-512): nothing to compare\n");
    return 0;
  }
  std::printf("%-22s %10s %10s %8s\n", "product", "blas", "onednn", "ratio");
  for (const Case& c : cases()) {
    double s[2] = {0, 0};
    for (CpuGemm g : {CpuGemm::Blas, CpuGemm::Onednn, CpuGemm::Onednn, CpuGemm::Blas}) {
      loom::model::use_cpu_gemm(g);
      s[g == CpuGemm::Onednn] += seconds_per_call(c.run, budget / 2);
    }
    std::printf("%-22s %7.1f GF %7.1f GF %7.2fx\n", c.name.c_str(), 2 * c.flops / s[0] / 1e9,
                2 * c.flops / s[1] / 1e9, s[0] / s[1]);
  }
  return 0;
}
