#include "loom/train/memory_estimate.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "loom/common/error.h"
#include "loom/model/compute.h"
#include "loom/plan/evaluate.h"
#include "loom/train/report.h"

namespace loom::train {
namespace {

// A cluster for the memory model only: speeds are nominal (the step time is not used) and the
// device memory unbounded (the machine's is compared here).
const plan::Cluster& nominal_cluster() {
  static const plan::Cluster c = plan::parse_cluster(R"(name = "memory-estimate"
note = "nominal speeds: only the memory model is used"
[node]
devices = 4096
[device]
memory_gb = 1000000
memory_bandwidth_gbs = 10
precision = "fp32"
peak_tflops = { fp32 = 1.0, bf16 = 1.0 }
[efficiency]
gemm_size = [1.0]
gemm = [1.0]
elementwise = 1.0
[intra]
bandwidth_gbs = 10
latency_us = 1
[inter]
bandwidth_gbs = 10
latency_us = 1
)",
                                                     "the memory estimate");
  return c;
}

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
double available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// What a rank holds before its model: libtorch's and the libraries' own memory (about 200 MB
// of anonymous memory per rank with libtorch 2.11 on a CPU, measured; the shared libraries'
// pages are shared). This process has loaded the same libraries, so its own anonymous memory
// now is a lower bound. 0 when unknown.
double process_baseline_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string key, unit;
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Anonymous:", 0) == 0) return std::stod(line.substr(10)) * 1024;
  return 0;
}

}  // namespace

RankMemory estimate_rank_memory(const config::Config& cfg, const Resolved& r) {
  if (!config::is_transformer(cfg.model.kind) || cfg.model.head_bias) return {};
  const plan::Transformer m = plan::transformer_of(cfg.model);
  plan::Parallel p;
  p.dp = r.dp;
  p.pp = r.pp;
  p.tp = r.tp;
  p.sequence_parallel = cfg.parallel.sequence_parallel;
  p.loops = r.loops;
  p.microbatches = r.m;
  p.micro_batch = r.micro_batch;
  p.schedule = cfg.parallel.schedule_file.empty() ? cfg.parallel.schedule : "1f1b";
  // The compressing and low-communication modes hold what allreduce holds plus one or two
  // buffers of the stage's size; the planner models allreduce.
  const auto mode = cfg.parallel.dp_mode;
  p.dp_mode = config::exact_dp(mode) ? mode : config::DpMode::AllReduce;
  p.reshard_after_forward = cfg.parallel.reshard_after_forward;
  p.max_unsharded = static_cast<int>(cfg.parallel.max_unsharded);
  p.recompute = cfg.parallel.recompute;
  plan::EvalOptions eo;
  eo.precision = cfg.train.precision == config::Precision::Bf16 ? "bf16" : "fp32";
  eo.async_save = cfg.output.async_save;  // the nominal cluster's devices are not the host
  const plan::Evaluation e = plan::evaluate(m, p, nominal_cluster(), eo);
  RankMemory out{e.sim.peak_memory(), 0};
  for (const plan::RankResult& rank : e.sim.ranks)
    out.save_copy = std::max(out.save_copy, rank.host_snapshot);
  return out;
}

void check_memory(const config::Config& cfg, const Resolved& r, int nproc) {
  RankMemory est;
  try {
    est = estimate_rank_memory(cfg, r);
  } catch (const UsageError&) {  // a layout the planner does not model: the baseline only
  }
  const double model = est.peak;
  constexpr const char* kFix =
      "use fewer ranks, more pipeline stages, --dp-mode zero3 or a smaller model (loom simulate "
      "--from-config shows the breakdown)";
  // On GPUs the model lives in the GPU's memory (ranks beyond the GPUs share one), the host
  // holds each process's libraries.
  const bool gpu = cfg.train.device == config::Device::Cuda;
  if (gpu && model > 0) {
    const model::GpuMemory g = model::gpu_memory();
    const int per_gpu = g.count > 0 ? (nproc + g.count - 1) / g.count : 0;
    if (per_gpu > 0 && model * per_gpu > g.bytes)
      LOOM_USAGE(
          per_gpu == 1 ? std::string("a rank") : detail::concat(per_gpu, " ranks on one GPU"),
          " of this model need", per_gpu == 1 ? "s" : "", " about ", human_bytes(model * per_gpu),
          " of GPU memory (parameters, gradients, optimizer "
          "state, activations), ",
          g.name, " has ", human_bytes(g.bytes), "; ", kFix);
  }
  const double baseline = process_baseline_bytes();
  // An async save's copy of the state is in host memory, on GPUs too.
  const double per_rank = (gpu ? 0 : model) + est.save_copy + baseline;
  const double have = available_bytes();
  if (per_rank <= 0 || have <= 0 || per_rank * nproc <= have) return;
  std::vector<std::string> held;
  if (model > 0 && !gpu) held.emplace_back("parameters, gradients, optimizer state, activations");
  if (est.save_copy > 0)
    held.push_back(human_bytes(est.save_copy) + " of an async save's copy of the state");
  std::string parts;
  for (const std::string& h : held) parts += (parts.empty() ? "" : ", ") + h;
  parts += (parts.empty() ? "" : " and ") + human_bytes(baseline) + " of libraries per process";
  const std::string need =
      nproc == 1
          ? detail::concat("this model needs about ", human_bytes(per_rank), " (", parts, ")")
          : detail::concat(nproc, " ranks of this model need about ", human_bytes(per_rank * nproc),
                           " (", human_bytes(per_rank), " on the largest rank: ", parts, ")");
  LOOM_USAGE(need, ", this machine has ", human_bytes(have), " available; ", kFix);
}

}  // namespace loom::train
