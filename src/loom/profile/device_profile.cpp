#include "loom/profile/device_profile.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/model/compute.h"
#include "loom/parallel/optimizer.h"
#include "loom/profile/timing.h"

namespace loom::profile {
namespace {

// The model name the NVIDIA driver reports for its first GPU, or "CUDA device 0".
std::string gpu_name() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream in(d.path() / "information");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("Model:", 0) == 0) {
        const size_t at = line.find_first_not_of(" \t", 6);
        return at == std::string::npos ? line : line.substr(at);
      }
  }
  return "CUDA device 0";
}

// Seconds of one call of fn on the GPU: batches of k calls between synchronizations (k grown
// until a batch lasts 20 ms), the median over batches filling `budget`.
double gpu_time(const std::function<void()>& fn, double budget) {
  fn();
  torch::cuda::synchronize();
  int k = 1;
  auto batch = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < k; ++i) fn();
    torch::cuda::synchronize();
    return seconds(t0);
  };
  while (batch() < 0.02 && k < (1 << 16)) k *= 2;
  std::vector<double> times;
  const auto t_all = Clock::now();
  while (times.size() < 3 || (seconds(t_all) < budget && times.size() < 50))
    times.push_back(batch() / k);
  return model::median_of(times);
}

// Measured over the specification; refuses a measurement above it (the file is wrong then).
double fraction(double measured, double spec, const char* unit, const std::string& what,
                const std::string& key, const plan::Cluster& base) {
  const double f = measured / spec;
  if (f > 1.02)
    LOOM_USAGE(what, " measured ", measured / 1e12, " ", unit, ", above ", base.origin, "'s ", key,
               " (", spec / 1e12, " ", unit, "); fix the base file's ", key);
  return std::min(1.0, f);
}

}  // namespace

void require_gpu() {
  if (const auto why = model::why_no_gpu(); !why.empty())
    LOOM_USAGE("loom profile --device cuda: this process sees no GPU (", why,
               "); run it on the GPU machine, or leave out --device to profile the CPU");
}

DeviceMeasurements measure_cuda(double budget) {
  require_gpu();
  const torch::Device dev = model::select_device(config::Device::Cuda, 0);
  const auto bf16 = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  torch::NoGradGuard no_grad;
  DeviceMeasurements m;
  m.device = gpu_name();

  for (int64_t n : {256, 512, 1024, 2048, 4096, 8192}) {
    torch::Tensor a = torch::randn({n, n}, bf16), b = torch::randn({n, n}, bf16);
    torch::Tensor c = torch::empty({n, n}, bf16);
    m.gemm_size.push_back(double(n));
    m.gemm_s.push_back(gpu_time([&] { at::mm_out(c, a, b); }, budget / 6));
  }

  {
    torch::Tensor x = torch::randn({256 << 20}, bf16), y = torch::empty_like(x);
    m.copy_bytes = 2.0 * double(x.numel()) * 2;  // read and written, 2 bytes each
    m.copy_s = gpu_time([&] { y.copy_(x); }, budget);
  }

  // Flash kernels' efficiency depends on the head size (their tiles) and the sequence (how
  // many tiles): a grid at one width and token count.
  for (const int64_t hd : {64, 128})
    for (const int64_t s : {1024, 4096}) {
      const int64_t b = 16384 / s, heads = 4096 / hd;
      torch::Tensor q = torch::randn({b, heads, s, hd}, bf16), k = torch::randn_like(q),
                    v = torch::randn_like(q), g = torch::randn_like(q);
      AttentionTiming t{double(hd), double(s), 0.5 * 4 * double(b) * s * s * double(heads * hd)};
      auto forward = [&] {
        return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
      };
      t.forward_s = gpu_time([&] { forward(); }, budget / 2);
      torch::AutoGradMode grad(true);
      for (torch::Tensor* x : {&q, &k, &v}) x->requires_grad_(true);
      const double both = gpu_time(
          [&] {
            torch::autograd::backward({forward()}, {g});
            for (torch::Tensor* x : {&q, &k, &v}) x->mutable_grad() = torch::Tensor();
          },
          budget / 2);
      t.backward_s = std::max(1e-9, both - t.forward_s);
      m.attention.push_back(t);
    }

  {
    torch::AutoGradMode grad(true);
    const auto fp32 = torch::TensorOptions().device(dev).dtype(torch::kFloat32);
    std::vector<torch::Tensor> ps;
    for (int i = 0; i < 4; ++i) {
      ps.push_back(torch::randn({4096, 1024}, fp32).requires_grad_(true));
      ps.back().mutable_grad() = torch::randn({4096, 1024}, fp32);
    }
    config::TrainConfig adamw;
    adamw.optimizer = config::Optimizer::AdamW;
    parallel::StageOptimizer opt(ps, adamw);
    m.optimizer_s_per_param =
        gpu_time([&] { opt.step(adamw.lr, 1.0); }, budget) / (4.0 * 4096 * 1024);
  }
  return m;
}

plan::Cluster device_cluster(plan::Cluster base, const DeviceMeasurements& m,
                             const std::string& date) {
  LOOM_CHECK(!m.gemm_size.empty() && m.gemm_size.size() == m.gemm_s.size(),
             "device profile: no matrix products measured");
  const double peak = base.peak("bf16");
  base.gemm_size = m.gemm_size;
  base.gemm_efficiency.clear();
  for (size_t i = 0; i < m.gemm_size.size(); ++i) {
    const double n = m.gemm_size[i];
    base.gemm_efficiency.push_back(fraction(2 * n * n * n / m.gemm_s[i], peak, "TFLOP/s",
                                            "a bf16 product", "peak_tflops.bf16", base));
  }
  base.elementwise_efficiency = fraction(m.copy_bytes / m.copy_s, base.memory_bandwidth, "TB/s",
                                         "a copy", "memory_bandwidth_gbs", base);
  base.attention.clear();
  for (const AttentionTiming& t : m.attention)
    base.attention.push_back({t.head_size, t.seq_len,
                              fraction(t.flops / t.forward_s, peak, "TFLOP/s",
                                       "the attention forward", "peak_tflops.bf16", base),
                              fraction(2.5 * t.flops / t.backward_s, peak, "TFLOP/s",
                                       "the attention backward", "peak_tflops.bf16", base)});
  base.optimizer_s_per_param = m.optimizer_s_per_param;
  const std::string what = detail::concat(
      "MEASURED on ", m.device, " by loom profile --device cuda on ", date,
      ": the bf16 GEMM curve, elementwise (a copy), the fused attention forward and backward "
      "by head size and sequence, "
      "the AdamW step; everything else from ",
      base.origin.empty() ? std::string("the base file") : base.origin, " (see its comments)");
  base.note = base.note.empty() ? what : base.note + "; " + what;
  base.calibrated = "none: " + what;
  return base;
}

}  // namespace loom::profile
