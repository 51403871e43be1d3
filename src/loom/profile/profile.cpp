// What loom profile measures, honestly and simply:
//  - matrix products (fp32, one thread per rank as `loom train` runs): GFLOP/s of square
//    products 32..1024; the best is the peak, the others the efficiency curve;
//  - memory bandwidth: a 64 MB copy;
//  - the gpt or llama blocks of a `loom train` configuration (embedding, one layer, head +
//    loss from model::build), forward and backward, at several micro-batch sizes (median),
//    and the bytes a forward keeps alive for its backward (heap growth, glibc mallinfo2);
//    each block alone; then the layer in windows of seconds alone and while every other core
//    runs it too: the ratio is the blocks' `loaded_slowdown`, with which the simulator shares
//    the cores among the ranks that compute at the same moment (plan/core_sharing.h);
//  - what a compute action costs beyond the blocks it runs: a stack of layers as one-layer
//    actions against one action per micro-batch (action_cost.h), at each micro-batch size;
//  - the AdamW step per parameter;
//  - the CPU a short run on two ranks uses beside its compute (runtime_cpu.h), which ranks
//    outnumbering the cores pay;
//  - point-to-point latency and bandwidth between two ranks through loom's communication
//    layer (ping-pong), by running two ranks of itself (mpirun -n 2, or loom's launcher over
//    Gloo without MPI; directly when started by MPI with two ranks or more), plus the
//    all-reduce bus bandwidth for the record.
// A node is this machine: devices = cores, `shared = true` (more ranks than cores time-share).
#include "loom/profile/profile.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/config/config.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/model.h"
#include "loom/parallel/optimizer.h"
#include "loom/plan/evaluate.h"
#include "loom/profile/action_cost.h"
#include "loom/profile/idle_group.h"
#include "loom/profile/links.h"
#include "loom/profile/runtime_cpu.h"
#include "loom/profile/timing.h"

namespace loom::profile {
namespace {

// Through the library the run's products take (train.cpu_gemm).
double gemm_gflops(int n, double budget) {
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  double t = median_time([&] { model::gemm_into(a, b, c, 0.f); }, budget);
  return 2.0 * n * n * n / t / 1e9;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double memory_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key >> kb)
    if (key == "MemTotal:") return kb * 1024;
  return 8e9;
}

}  // namespace

std::optional<Measured> measure(const Options& o) {
  const std::string& config_path = o.config;
  config::Config cfg = config::load_file(config_path);
  if (!config::is_transformer(cfg.model.kind))
    LOOM_USAGE("loom profile measures gpt and llama blocks; ", config_path, " has model.kind '",
               cfg.model.kind, "'");
  if (cfg.model.tie_embeddings)
    LOOM_USAGE("loom profile measures untied heads; drop model.tie_embeddings in ", config_path);
  const double budget = o.seconds;

  // Inside MPI (mpirun -n 2 loom profile): measure the link first; rank 0 goes on alone.
  std::vector<double> link = {0, 0, 0};
  const bool in_mpi = comm::launched_by_mpi();
  if (in_mpi) {
    comm::init(comm::BackendKind::Mpi, nullptr, nullptr);
    if (comm::world().size() >= 2) link = measure_comm();
    const int rank = comm::world().rank();
    comm::finalize();
    if (rank != 0) return std::nullopt;
  }

  torch::set_num_threads(static_cast<int>(cfg.train.threads));
  model::use_cpu_gemm(cfg.train.cpu_gemm);
  torch::manual_seed(1);
  plan::Cluster c;
  c.name = "this-machine";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  c.devices_per_node = static_cast<int>(cores);
  c.shared = true;
  c.precision = "fp32";

  std::cerr << "loom profile: matrix products (" << model::cpu_gemm_in_use() << ")\n";
  std::vector<int> dims = {32, 64, 128, 256, 512, 1024};
  std::vector<double> gf;
  for (int n : dims) gf.push_back(gemm_gflops(n, budget));
  const double peak = *std::max_element(gf.begin(), gf.end());
  c.peak_flops["fp32"] = peak * 1e9;
  for (size_t i = 0; i < dims.size(); ++i) {
    c.gemm_size.push_back(dims[i]);
    c.gemm_efficiency.push_back(gf[i] / peak);
  }

  std::cerr << "loom profile: memory bandwidth\n";
  {
    auto src = torch::randn({16 << 20}), dst = torch::empty({16 << 20});
    const double t = median_time([&] { dst.copy_(src); }, budget);
    c.memory_bandwidth = 2.0 * src.numel() * 4 / t;  // read + write
    c.elementwise_efficiency = 1.0;                  // measured with an elementwise copy
  }
  c.memory_bytes = memory_total_bytes() / cores;

  // Blocks are timed alone and, unless `alone`, also while the other cores run them.
  const int load_cores = o.alone ? 0 : static_cast<int>(cores) - 1;
  std::cerr << "loom profile: " << cfg.model.kind << " blocks of " << config_path << " (alone)\n";
  const auto& mc = cfg.model;
  const plan::Transformer model = plan::transformer_of(mc);
  std::vector<BlockJob> jobs;
  // The three kinds of blocks of `m` (a tp shard when tp > 1) at every micro-batch size.
  auto add_jobs = [&](const model::Model& m, int64_t tp) {
    for (int64_t b : o.micro_batch_sizes) {
      torch::Tensor tokens = torch::randint(mc.vocab, {b, mc.seq_len}, torch::kLong);
      torch::Tensor act = torch::randn({b, mc.seq_len, mc.width});
      jobs.push_back({"embedding", b, m.blocks.front().get(), tokens, {}});
      jobs.push_back({"layer", b, m.blocks[1].get(), act, {}});
      jobs.push_back({"head", b, m.blocks.back().get(), act, tokens});
      for (size_t i = jobs.size() - 3; i < jobs.size(); ++i) {
        jobs[i].tp = tp;
        jobs[i].loss = m.criterion;
      }
    }
  };
  const model::Model whole = model::build(cfg.model, cfg.train.seed);
  add_jobs(whole, 1);
  // Tensor-parallel shards of the same blocks (same seed: the parts of the same parameters).
  std::vector<std::unique_ptr<comm::Backend>> groups;
  std::vector<model::Model> shards;
  shards.reserve(o.tp_degrees.size());
  for (int64_t t : o.tp_degrees) {
    if (t <= 1) continue;
    if (!plan::splits_over(model, static_cast<int>(t))) {
      std::cerr
          << "loom profile: no tp " << t << " shards (the model does not split " << t
          << " ways: heads, width, and a llama's key/value heads, SwiGLU width, vocabulary)\n";
      continue;
    }
    std::cerr << "loom profile: the same blocks as tp " << t << " shards\n";
    groups.push_back(idle_group(static_cast<int>(t)));
    shards.push_back(
        model::build(cfg.model, cfg.train.seed,
                     model::TensorParallel{static_cast<int>(t), 0, groups.back().get(), false}));
    add_jobs(shards.back(), t);
  }
  // What an action costs beyond its blocks (action_cost.h), on a stack of up to 4 layers.
  std::vector<ActionJob> actions;
  const size_t stack = std::min<size_t>(4, whole.blocks.size() - 2);
  if (stack >= 2)
    for (int64_t b : o.micro_batch_sizes) {
      ActionJob a{b, {}, torch::randn({b, mc.seq_len, mc.width})};
      for (size_t l = 1; l <= stack; ++l) a.layers.push_back(whole.blocks[l].get());
      actions.push_back(std::move(a));
    }
  else
    std::cerr << "loom profile: one layer: what an action costs beyond its blocks is not "
                 "measured (0)\n";
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    for (BlockJob& j : jobs) sample_block(j, budget / kRounds);
    for (ActionJob& a : actions) sample_action_cost(a, budget / kRounds);
  }
  BlockJob& probe = *std::max_element(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) {
    auto size = [](const BlockJob& j) {
      return j.kind == std::string("layer") && j.tp == 1 ? j.micro_batch : 0;
    };
    return size(x) < size(y);
  });
  for (const BlockJob& j : jobs) {
    const BlockTimes t = summarize(j);
    c.blocks.push_back({j.kind, mc.width, mc.seq_len, mc.heads, mc.vocab, j.micro_batch,
                        t.forward_s, t.backward_s, t.input_s, t.weight_s, t.activation_bytes, 1.0,
                        j.tp});
    if (j.tp == 1 && j.kind == std::string("layer"))
      for (const ActionJob& a : actions)
        if (a.micro_batch == j.micro_batch) c.blocks.back().action_s = action_cost_s(a);
    if (model.arch == plan::Arch::Llama) {
      c.blocks.back().model = "llama";
      c.blocks.back().kv_heads = plan::kv_heads_of(model);
      c.blocks.back().ffn_width = int64_t(plan::ffn_width(model));
    }
    char action[64] = "";
    if (c.blocks.back().action_s > 0)
      std::snprintf(action, sizeof action, ", an action %.3f ms beyond",
                    c.blocks.back().action_s * 1e3);
    std::fprintf(stderr,
                 "  %-9s tp %lld micro-batch %3lld: forward %8.3f ms, backward %8.3f ms "
                 "(I %.3f + W %.3f), keeps %s%s\n",
                 j.kind, (long long)j.tp, (long long)j.micro_batch, t.forward_s * 1e3,
                 t.backward_s * 1e3, t.input_s * 1e3, t.weight_s * 1e3,
                 plan::human_bytes(t.activation_bytes).c_str(), action);
  }

  std::cerr << "loom profile: AdamW step (the optimizer loom train uses)\n";
  {
    std::vector<torch::Tensor> ps;
    for (int i = 0; i < 4; ++i) {
      ps.push_back(torch::randn({512, 1024}).requires_grad_(true));
      ps.back().mutable_grad() = torch::randn({512, 1024});
    }
    config::TrainConfig adamw;
    adamw.optimizer = config::Optimizer::AdamW;
    parallel::StageOptimizer opt(ps, adamw);
    const double t = median_time([&] { opt.step(adamw.lr, 1.0); }, budget);
    c.optimizer_s_per_param = t / (4.0 * 512 * 1024);
  }

  if (o.links && !in_mpi) {
    std::cerr << "loom profile: point-to-point between two ranks";
    std::vector<std::string> slowdown_args;
    if (load_cores > 0) {  // and the slowdown of a rank while the other computes
      std::cerr << ", and a rank's compute while the other computes";
      slowdown_args = {"--config",      config_path,
                       "--slowdown-mb", std::to_string(probe.micro_batch),
                       "--seconds",     detail::concat(budget)};
    }
    std::cerr << "\n";
    link = comm_via_two_ranks(slowdown_args);
  }
  // One slowdown under load for the machine, from the layer at the largest micro-batch: two
  // MPI ranks as loom train runs them when the links were measured, else forked processes.
  double loaded = 1;
  if (load_cores > 0) {
    double slowdown = link.size() > 3 ? link[3] : 0;
    const char* how = "two ranks";
    if (slowdown <= 0) {
      slowdown = sustained_slowdown(probe, load_cores, budget, std::max(0.5, budget));
      how = "forked processes";
    }
    std::fprintf(stderr,
                 "loom profile: layer (micro-batch %lld) with every core busy: x%.2f (%s)\n",
                 (long long)probe.micro_batch, slowdown, how);
    for (plan::BlockProfile& bp : c.blocks) bp.loaded_slowdown = slowdown;
    loaded = slowdown;
  }
  // Twice as many ranks as cores: the layer's time among 2C ranks on C cores over its fair share
  // (2 x its time with every core busy). What time-sharing costs beyond that share (switching
  // between ranks, each finding the caches the other left) is the cluster's `oversubscribed`.
  // Measured as a run calibrates (2C ranks of this executable, each alone, then all at once)
  // when the links were, else with forked processes in windows of seconds.
  const char* shared_how = nullptr;
  if (!o.alone) {
    const int n = 2 * static_cast<int>(cores);
    double shared = 0;
    if (o.links && !in_mpi) {
      std::cerr << "loom profile: the layer on " << n << " ranks (" << cores << " cores)\n";
      shared = time_shared_via_ranks(n, config_path, probe.micro_batch, budget);
      shared_how = "ranks";
    } else {
      shared = sustained_slowdown(probe, n - 1, budget, std::max(0.5, budget));
      shared_how = "forked processes";
    }
    c.oversubscribed = std::max(1.0, shared / (2.0 * loaded));
    std::fprintf(stderr,
                 "loom profile: layer (micro-batch %lld) among %d %s on %u cores: x%.2f alone, "
                 "x%.2f its fair share\n",
                 (long long)probe.micro_batch, n, shared_how, cores, shared, c.oversubscribed);
  }
  // The CPU a run spends beside its compute, which time-shared cores run too (runtime_cpu.h).
  bool run_measured = false;
  if (!o.alone && o.links && !in_mpi) {
    std::cerr << "loom profile: a short run on two ranks (its CPU beside its compute)\n";
    std::string why;
    const double r = runtime_cpu_of_a_run(config_path, mc.layers, &why);
    if (r > 0) {
      c.runtime_cpu = r;
      run_measured = true;
      std::fprintf(stderr, "loom profile: the run used x%.3f the CPU of its compute\n", r);
    } else {
      std::cerr << "loom profile: warning: " << why << "; runtime_cpu not measured (1)\n";
    }
  }
  if (link[1] > 0) {
    c.intra = {link[1], 1.0, link[0]};
  } else {
    c.intra = {10e9, 1.0, 50e-6};  // not measured: a guess, said so in the note
  }
  c.inter = c.intra;  // one machine

  std::ostringstream note;
  note << "measured by loom profile on " << profile_date() << ": " << cpu_model() << ", " << cores
       << " cores, " << cfg.train.threads << " compute thread(s) per rank, libtorch "
       << TORCH_VERSION << "; blocks of " << config_path << " timed alone, "
       << model::kTimingInFlight << " micro-batches in flight"
       << (actions.empty() ? std::string()
                           : detail::concat("; action_ms: ", stack,
                                            " layers run as one-layer actions against one "
                                            "action a micro-batch, the difference per extra "
                                            "action"))
       << (load_cores ? detail::concat("; loaded_slowdown: the layer with the other ", load_cores,
                                       " core(s) running it, in windows of seconds")
                      : std::string())
       << (shared_how ? detail::concat("; oversubscribed: the layer among ", 2 * cores, " ",
                                       shared_how, " over its fair share")
                      : std::string())
       << (run_measured ? detail::concat("; runtime_cpu: a ", kShortRunSteps,
                                         "-step run on 2 ranks, its CPU over its F/B/I/W's")
                        : std::string())
       << "; ";
  if (link[1] > 0)
    note << "p2p via loom::comm (" << comm::backend_name(comm::launch_backend())
         << "): " << link[0] * 1e6 << " us, " << link[1] / 1e9 << " GB/s; all-reduce bus bandwidth "
         << link[2] / 1e9 << " GB/s (2 ranks)";
  else
    note << "links NOT measured (--no-comm): 10 GB/s and 50 us are placeholders";
  c.note = note.str();
  c.calibrated = "none: every number measured on this machine";

  char summary[256];
  int n = std::snprintf(summary, sizeof summary,
                        "loom profile: peak %.1f GFLOP/s (fp32, %lld thread), memory %.1f GB/s, ",
                        peak, (long long)cfg.train.threads, c.memory_bandwidth / 1e9);
  if (link[1] > 0)
    std::snprintf(summary + n, sizeof summary - n, "p2p %.1f us + %.2f GB/s", link[0] * 1e6,
                  link[1] / 1e9);
  else
    std::snprintf(summary + n, sizeof summary - n, "links not measured");
  return Measured{std::move(c), summary};
}

std::string profile_date() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  return date;
}

void write_cluster(const plan::Cluster& c, const std::string& path) {
  std::string text =
      "# Written by `loom profile`; format in src/loom/plan/cluster.h.\n" + plan::to_toml(c);
  plan::parse_cluster(text, path);  // what we write must read back
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  write_file_atomic(path, text, "pass a writable path to --out");
}

}  // namespace loom::profile
