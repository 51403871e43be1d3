// loom profile: measure this machine and write a cluster file (src/loom/plan/cluster.h) that
// `loom simulate` and `loom plan` read. What it measures, honestly and simply:
//  - matrix products (fp32, one thread per rank as `loom train` runs): GFLOP/s of square
//    products 32..1024; the best is the peak, the others the efficiency curve;
//  - memory bandwidth: a 64 MB copy;
//  - the GPT blocks of a `loom train` configuration (embedding, one transformer layer, head +
//    loss from model::build), forward and backward, at several micro-batch sizes (median),
//    and the bytes a forward keeps alive for its backward (heap growth, glibc mallinfo2);
//    each block alone; then the layer in windows of seconds alone and while every other core
//    runs it too: the ratio is the blocks' `loaded_slowdown`, with which the simulator shares
//    the cores among the ranks that compute at the same moment (plan/core_sharing.h);
//  - the AdamW step per parameter;
//  - point-to-point latency and bandwidth between two ranks through loom's communication
//    layer (ping-pong), by running `mpirun -n 2` of itself (or directly when started by MPI
//    with two ranks or more), plus the all-reduce bus bandwidth for the record.
// A node is this machine: devices = cores, `shared = true` (more ranks than cores time-share).
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "loom/cli/args.h"
#include "loom/cli/commands.h"
#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/model/block_timing.h"
#include "loom/model/model.h"
#include "loom/parallel/grad_sync.h"
#include "loom/plan/cluster.h"
#include "loom/plan/evaluate.h"

namespace loom::cli {
namespace {

using Clock = std::chrono::steady_clock;

const char* kProfileHelp = R"(usage: loom profile [--out clusters/this-machine.toml] [--config configs/gpt-fortunes.toml]
                    [--micro-batch-sizes 1,2,4,8,16] [--seconds 1] [--no-comm] [--alone]

Measures this machine (matrix products, memory bandwidth, the GPT blocks of the config's
model at each micro-batch size, the AdamW step, and point-to-point latency and bandwidth
between two ranks via `mpirun -n 2`) and writes a cluster file for loom simulate and loom plan.
Blocks are timed alone; then the layer, in windows of seconds, alone and while every other
core runs it too (as the other ranks of a training run do: they share memory bandwidth,
caches and, on a virtual machine, maybe the physical core); the ratio is written as each
block's loaded_slowdown. --alone skips that (slowdown 1). Run it on an otherwise idle
machine: what else runs is measured too.
)";

double seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median seconds of fn over repetitions filling `budget` seconds (at least 3, after 1 warm-up).
template <typename F>
double median_time(F fn, double budget) {
  fn();
  std::vector<double> times;
  auto t_all = Clock::now();
  while (times.size() < 3 || (seconds(t_all) < budget && times.size() < 1000)) {
    auto t0 = Clock::now();
    fn();
    times.push_back(seconds(t0));
  }
  return model::median_of(times);
}

double heap_bytes() {
  struct mallinfo2 mi = mallinfo2();
  return double(mi.uordblks) + double(mi.hblkhd);  // in use: arena + mmapped chunks
}

// Keeps `n` other cores busy with `work` (forked processes) while a block is timed, paused
// (SIGSTOP) and resumed (SIGCONT) so that timings alone and loaded can alternate. A rank of
// loom train shares memory bandwidth and caches with the ranks on the other cores; here a
// block takes up to ~1.8x as long while the other core computes. Processes rather than
// threads keep the parent's heap (which measures the bytes a forward keeps) to itself.
class CoreLoad {
 public:
  CoreLoad(int n, const std::function<void()>& work) {
    if (n <= 0) return;
    // Rounds of work done by the children, in memory they share with the parent: a load that
    // makes no progress (a child stuck in a lock that fork() copied) must not pass for "the
    // other cores do not slow this one down".
    void* shared = mmap(nullptr, sizeof(std::atomic<long>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return;
    rounds_ = new (shared) std::atomic<long>(0);
    std::fflush(nullptr);
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        // The parent's compute threads do not survive fork(). One thread, inline, as a rank runs.
        torch::set_num_threads(1);
        for (;;) {
          work();
          rounds_->fetch_add(1);
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
    pause();
  }
  ~CoreLoad() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
    if (rounds_) munmap(rounds_, sizeof(std::atomic<long>));
  }
  long rounds() const { return rounds_ ? rounds_->load() : 0; }
  void pause() {
    for (pid_t p : pids_) kill(p, SIGSTOP);
    for (pid_t p : pids_) waitpid(p, nullptr, WUNTRACED);  // stopped for sure
  }
  void resume() {
    for (pid_t p : pids_) kill(p, SIGCONT);
  }
  CoreLoad(const CoreLoad&) = delete;
  CoreLoad& operator=(const CoreLoad&) = delete;

 private:
  std::vector<pid_t> pids_;
  std::atomic<long>* rounds_ = nullptr;
};

using model::median_of;

struct BlockTimes {
  double forward_s = 0, backward_s = 0, activation_bytes = 0;
  double input_s = 0, weight_s = 0;  // I and W of the zero-bubble split (0: not measured)
};

// One GPT block at one micro-batch size, and the samples taken of it so far. Samples come in
// rounds spread over the whole profile (this virtual machine's speed drifts by +-20% over tens
// of seconds; a median over rounds sees several of its phases).
struct BlockJob {
  const char* kind;
  int64_t micro_batch;
  model::Block* block;
  torch::Tensor input, target;  // target: the head's tokens (its loss)
  torch::Tensor grad;           // random output gradient (not the head)
  std::vector<double> fwd, both, in_s, w_s;
  double activation_bytes = -1;
};

torch::Tensor run_forward(BlockJob& j) { return model::forward_for_timing(*j.block, j.input, j.target); }

double forward_backward(BlockJob& j) {
  return model::time_forward_backward(*j.block, j.input, j.target, j.grad);
}

// One round of `budget` seconds: forward with autograd as in training, backward from a random
// output gradient (the head: from its loss), each alone; forward and forward + backward
// alternate in one loop so that both medians see the same moments (backward = their
// difference). Activation bytes (first round): heap growth while the forward's output (and
// so its autograd graph) is alive, smallest of 3 tries.
void sample_block(BlockJob& j, double budget) {
  if (j.activation_bytes < 0) {
    j.activation_bytes = 1e30;
    for (int i = 0; i < 3; ++i) {
      const double before = heap_bytes();
      torch::Tensor y = run_forward(j);
      j.activation_bytes = std::min(j.activation_bytes, std::max(0.0, heap_bytes() - before));
    }
  }
  // The zero-bubble split as parallel/stage.cpp runs it: the input gradient with the graph
  // retained, then the weight gradients through the retained graph (not for the embedding,
  // whose input is token ids).
  const bool split = j.input.is_floating_point();
  std::vector<torch::Tensor> weights = j.block->parameters();
  const auto t_all = Clock::now();
  for (int it = 0; it < 2 || (seconds(t_all) < budget && it < 2000); ++it) {
    double ti = 0, tw = 0;
    if (split) {
      torch::Tensor x = j.input.detach().requires_grad_(true);
      torch::Tensor y = j.block->forward(x);
      if (j.target.defined()) y = model::Model::loss(y, j.target);
      if (!j.grad.defined() && !j.target.defined()) j.grad = torch::randn_like(y);
      const torch::Tensor g = j.target.defined() ? torch::Tensor() : j.grad;
      auto t0 = Clock::now();
      torch::autograd::grad({y}, {x}, {g}, /*retain_graph=*/true);
      ti = seconds(t0);
      t0 = Clock::now();
      torch::autograd::grad({y}, weights, {g}, /*retain_graph=*/false, /*create_graph=*/false,
                            /*allow_unused=*/true);
      tw = seconds(t0);
    }
    auto t0 = Clock::now();
    { torch::Tensor y = run_forward(j); }
    const double f = seconds(t0);
    const double fb = forward_backward(j);
    if (it == 0) continue;  // warm-up
    j.fwd.push_back(f);
    j.both.push_back(fb);
    if (split) {
      j.in_s.push_back(ti);
      j.w_s.push_back(tw);
    }
  }
}

// How much slower a block runs while every other core computes too, in windows of seconds
// (a machine may take a second or two to settle at a new load). Two cycles of: `settle`
// seconds of the block alone, untimed, then `budget` timed; the same with the other cores
// running it. Returns loaded / alone (medians), or 1 with a warning when the load made no
// progress.
double sustained_slowdown(BlockJob& j, int load_cores, double budget, double settle) {
  if (load_cores <= 0) return 1.0;
  CoreLoad load(load_cores, [&] { forward_backward(j); });
  std::vector<double> alone, loaded;
  auto window = [&](std::vector<double>& out) {
    for (auto t0 = Clock::now(); seconds(t0) < settle;) forward_backward(j);
    for (auto t0 = Clock::now(); out.size() < 3 || seconds(t0) < budget;)
      out.push_back(forward_backward(j));
  };
  long rounds0 = 0;
  for (int cycle = 0; cycle < 2; ++cycle) {
    window(alone);
    rounds0 = load.rounds();
    load.resume();
    window(loaded);
    load.pause();
  }
  if (load.rounds() == rounds0) {
    std::fprintf(stderr, "loom profile: warning: the load on the other cores made no progress; "
                         "the slowdown under load is not measured (1)\n");
    return 1.0;
  }
  return std::max(1.0, median_of(loaded) / median_of(alone));
}

BlockTimes summarize(const BlockJob& j) {
  BlockTimes out;
  out.activation_bytes = j.activation_bytes;
  out.forward_s = median_of(j.fwd);
  out.backward_s = std::max(0.0, median_of(j.both) - out.forward_s);
  if (!j.in_s.empty()) {
    out.input_s = median_of(j.in_s);
    out.weight_s = median_of(j.w_s);
  }
  return out;
}

double gemm_gflops(int n, double budget) {
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  double t = median_time([&] { torch::mm(a, b); }, budget);
  return 2.0 * n * n * n / t / 1e9;
}

// Ping-pong and all-reduce between ranks 0 and 1 of the world; rank 0 returns
// {latency_s, bandwidth_Bps, allreduce_busbw_Bps}.
std::vector<double> measure_comm() {
  comm::Backend& w = comm::world();
  const int me = w.rank();
  std::vector<double> out = {0, 0, 0};
  if (me > 1) {
    w.barrier()->wait();
    return out;
  }
  auto one_way = [&](size_t bytes) {
    std::vector<float> buf(std::max<size_t>(1, bytes / 4));
    const int reps = bytes <= (1 << 16) ? 200 : 20;
    w.barrier()->wait();
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      if (me == 0) {
        w.send(buf.data(), buf.size(), comm::DType::Float32, 1, 7)->wait();
        w.recv(buf.data(), buf.size(), comm::DType::Float32, 1, 8)->wait();
      } else {
        w.recv(buf.data(), buf.size(), comm::DType::Float32, 0, 7)->wait();
        w.send(buf.data(), buf.size(), comm::DType::Float32, 0, 8)->wait();
      }
    }
    return seconds(t0) / reps / 2;
  };
  const double lat = one_way(4);
  const size_t big = size_t(16) << 20;
  const double t_big = one_way(big);
  out[0] = lat;
  out[1] = big / std::max(1e-9, t_big - lat);
  if (w.size() == 2) {
    std::vector<float> v(big / 4, 1.0f);
    w.all_reduce(v.data(), v.size(), comm::DType::Float32)->wait();
    auto t0 = Clock::now();
    for (int i = 0; i < 5; ++i) w.all_reduce(v.data(), v.size(), comm::DType::Float32)->wait();
    const double t = seconds(t0) / 5;
    out[2] = 2.0 * (w.size() - 1) / w.size() * big / t;  // bus bandwidth, as nccl-tests
  }
  w.barrier()->wait();
  return out;
}

// The slowdown of the layer (micro-batch b) on rank 0 while rank 1 computes it too, against
// rank 1 idle (asleep), the way two ranks of loom train share the machine: processes of their
// own, each bound to a core by mpirun. Windows of settle + budget seconds, alone / loaded /
// alone / loaded, timed from a barrier; rank 0 records the last `budget` seconds of each.
// Rank 0 returns loaded / alone (medians), the others 0.
double ranks_slowdown(const config::Config& cfg, int64_t b, double budget) {
  comm::Backend& w = comm::world();
  const int me = w.rank();
  torch::set_num_threads(1);
  model::Model m = model::build(cfg.model, cfg.train.seed);
  BlockJob j{"layer", b, m.blocks[1].get(), torch::randn({b, cfg.model.seq_len, cfg.model.width}), {}};
  forward_backward(j);  // warm-up
  const double settle = std::max(0.5, budget), window = settle + budget;
  std::vector<double> alone, loaded;
  w.barrier()->wait();
  const auto t0 = Clock::now();
  for (int k = 0; k < 4; ++k) {
    const bool load = k % 2 == 1;
    const double end = (k + 1) * window;
    if (me == 0) {
      while (seconds(t0) < k * window + settle) forward_backward(j);
      while (seconds(t0) < end) (load ? loaded : alone).push_back(forward_backward(j));
    } else if (load) {
      while (seconds(t0) < end) forward_backward(j);
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, end - seconds(t0))));
    }
  }
  w.barrier()->wait();
  if (me != 0 || alone.empty() || loaded.empty()) return 0;
  return std::max(1.0, median_of(loaded) / median_of(alone));
}

// Runs `mpirun -n 2 <self> profile --comm-child FILE [--config C --slowdown-mb B --seconds S]`
// and reads its numbers: latency, bandwidth, all-reduce bus bandwidth, and (when asked) the
// slowdown of one rank's compute while the other computes (0 = not measured).
std::vector<double> comm_via_mpirun(const std::vector<std::string>& slowdown_args) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("loom-profile-" + std::to_string(::getpid()))).string();
  std::vector<std::string> cmd = {"mpirun", "-n", "2", "--oversubscribe", "--quiet"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (const char* s : {"profile", "--comm-child"}) cmd.push_back(s);
  cmd.push_back(file);
  cmd.insert(cmd.end(), slowdown_args.begin(), slowdown_args.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    setenv("OMP_NUM_THREADS", "1", 1);
    std::vector<char*> argv;
    for (auto& c : cmd) argv.push_back(c.data());
    argv.push_back(nullptr);
    ::execvp("mpirun", argv.data());
    _exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(file);
  std::vector<double> v(4, 0.0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !(in >> v[0] >> v[1] >> v[2] >> v[3]))
    throw Error("the communication measurement (mpirun -n 2 loom profile --comm-child) failed; "
                "run loom doctor, or pass --no-comm to skip it");
  std::filesystem::remove(file);
  return v;
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

int profile_command(const std::vector<std::string>& args) {
  Args a = take_flags(args, {"out", "config", "micro-batch-sizes", "seconds", "comm-child",
                             "slowdown-mb"},
                      {"help", "no-comm", "alone"});
  if (a.flags.count("help")) {
    std::cout << kProfileHelp;
    return 0;
  }
  if (!a.rest.empty())
    LOOM_USAGE("unknown argument '", a.rest[0], "' for loom profile; see loom profile --help");
  if (a.flags.count("comm-child")) {  // internal: the ranks of comm_via_mpirun
    comm::init(comm::BackendKind::Mpi, nullptr, nullptr);
    std::vector<double> v = measure_comm();
    v.push_back(0);
    if (a.flags.count("slowdown-mb") && comm::world().size() == 2) {
      const double budget =
          a.flags.count("seconds") ? config::parse_duration(a.flags.at("seconds")) : 1.0;
      v[3] = ranks_slowdown(config::load_file(a.flags.at("config")),
                            to_int("slowdown-mb", a.flags.at("slowdown-mb"), 1, 1 << 16), budget);
    }
    if (comm::world().rank() == 0) {
      std::ofstream out(a.flags.at("comm-child"));
      out.precision(9);
      out << v[0] << " " << v[1] << " " << v[2] << " " << v[3] << "\n";
    }
    comm::finalize();
    return 0;
  }
  const std::string out_path =
      a.flags.count("out") ? a.flags.at("out") : "clusters/this-machine.toml";
  const std::string config_path =
      a.flags.count("config") ? a.flags.at("config") : "configs/gpt-fortunes.toml";
  config::Config cfg = config::load_file(config_path);
  if (cfg.model.kind != "gpt")
    LOOM_USAGE("loom profile measures GPT blocks; ", config_path, " has model.kind '",
               cfg.model.kind, "'");
  std::vector<int64_t> sizes;
  {
    std::stringstream in(a.flags.count("micro-batch-sizes") ? a.flags.at("micro-batch-sizes")
                                                            : "1,2,4,8,16");
    std::string item;
    while (std::getline(in, item, ','))
      sizes.push_back(to_int("micro-batch-sizes", item, 1, 1 << 16));
  }
  double budget = 1.0;
  if (a.flags.count("seconds")) budget = config::parse_duration(a.flags.at("seconds"));

  // Inside MPI (mpirun -n 2 loom profile): measure the link first; rank 0 goes on alone.
  std::vector<double> link = {0, 0, 0};
  const bool in_mpi = comm::launched_by_mpi();
  if (in_mpi) {
    comm::init(comm::BackendKind::Mpi, nullptr, nullptr);
    if (comm::world().size() >= 2) link = measure_comm();
    const int rank = comm::world().rank();
    comm::finalize();
    if (rank != 0) return 0;
  }

  torch::set_num_threads(static_cast<int>(cfg.train.threads));
  torch::manual_seed(1);
  plan::Cluster c;
  c.name = "this-machine";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  c.devices_per_node = static_cast<int>(cores);
  c.shared = true;
  c.precision = "fp32";

  std::cerr << "loom profile: matrix products\n";
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
    c.elementwise_efficiency = 1.0;  // measured with an elementwise copy
  }
  c.memory_bytes = memory_total_bytes() / cores;

  // Blocks are timed alone and, unless --alone, also while the other cores run them.
  const int load_cores = a.flags.count("alone") ? 0 : static_cast<int>(cores) - 1;
  std::cerr << "loom profile: GPT blocks of " << config_path << " (alone)\n";
  model::Model m = model::build(cfg.model, cfg.train.seed);
  const auto& mc = cfg.model;
  std::vector<BlockJob> jobs;
  for (int64_t b : sizes) {
    torch::Tensor tokens = torch::randint(mc.vocab, {b, mc.seq_len}, torch::kLong);
    torch::Tensor act = torch::randn({b, mc.seq_len, mc.width});
    jobs.push_back({"embedding", b, m.blocks.front().get(), tokens, {}});
    jobs.push_back({"layer", b, m.blocks[1].get(), act, {}});
    jobs.push_back({"head", b, m.blocks.back().get(), act, tokens});
  }
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round)
    for (BlockJob& j : jobs) sample_block(j, budget / kRounds);
  BlockJob& probe = *std::max_element(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) {
    return (x.kind == std::string("layer") ? x.micro_batch : 0) <
           (y.kind == std::string("layer") ? y.micro_batch : 0);
  });
  for (const BlockJob& j : jobs) {
    const BlockTimes t = summarize(j);
    c.blocks.push_back({j.kind, mc.width, mc.seq_len, mc.heads, mc.vocab, j.micro_batch,
                        t.forward_s, t.backward_s, t.input_s, t.weight_s, t.activation_bytes});
    std::fprintf(stderr,
                 "  %-9s micro-batch %3lld: forward %8.3f ms, backward %8.3f ms "
                 "(I %.3f + W %.3f), keeps %s\n",
                 j.kind, (long long)j.micro_batch, t.forward_s * 1e3, t.backward_s * 1e3,
                 t.input_s * 1e3, t.weight_s * 1e3, plan::human_bytes(t.activation_bytes).c_str());
  }

  std::cerr << "loom profile: AdamW step (the optimizer loom train uses)\n";
  {
    std::vector<torch::Tensor> ps;
    for (int i = 0; i < 4; ++i) {
      ps.push_back(torch::randn({512, 1024}).requires_grad_(true));
      ps.back().mutable_grad() = torch::randn({512, 1024});
    }
    config::TrainConfig adamw;
    adamw.optimizer = "adamw";
    auto opt = parallel::make_optimizer(ps, adamw);
    const double t = median_time([&] { opt->step(); }, budget);
    c.optimizer_s_per_param = t / (4.0 * 512 * 1024);
  }

  if (!a.flags.count("no-comm") && !in_mpi) {
    std::cerr << "loom profile: point-to-point between two ranks (mpirun -n 2)";
    std::vector<std::string> slowdown_args;
    if (load_cores > 0) {  // and the slowdown of a rank while the other computes
      std::cerr << ", and a rank's compute while the other computes";
      slowdown_args = {"--config", config_path, "--slowdown-mb",
                       std::to_string(probe.micro_batch), "--seconds", detail::concat(budget)};
    }
    std::cerr << "\n";
    link = comm_via_mpirun(slowdown_args);
  }
  // One slowdown under load for the machine, from the layer at the largest micro-batch: two
  // MPI ranks as loom train runs them when the links were measured, else forked processes.
  if (load_cores > 0) {
    double slowdown = link.size() > 3 ? link[3] : 0;
    const char* how = "two ranks";
    if (slowdown <= 0) {
      slowdown = sustained_slowdown(probe, load_cores, budget, std::max(0.5, budget));
      how = "forked processes";
    }
    std::fprintf(stderr, "loom profile: layer (micro-batch %lld) with every core busy: x%.2f (%s)\n",
                 (long long)probe.micro_batch, slowdown, how);
    for (plan::BlockProfile& bp : c.blocks) bp.loaded_slowdown = slowdown;
  }
  if (link[1] > 0) {
    c.intra = {link[1], 1.0, link[0]};
  } else {
    c.intra = {10e9, 1.0, 50e-6};  // not measured: a guess, said so in the note
  }
  c.inter = c.intra;  // one machine

  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  std::ostringstream note;
  note << "measured by loom profile on " << date << ": " << cpu_model() << ", " << cores
       << " cores, " << cfg.train.threads << " compute thread(s) per rank, libtorch "
       << TORCH_VERSION << "; blocks of " << config_path
       << (load_cores ? detail::concat(" timed alone; loaded_slowdown: the layer with the other ",
                                       load_cores, " core(s) running it, in windows of seconds")
                      : std::string(" timed alone"))
       << "; ";
  if (link[1] > 0)
    note << "p2p via loom::comm: " << link[0] * 1e6 << " us, " << link[1] / 1e9
         << " GB/s; all-reduce bus bandwidth " << link[2] / 1e9 << " GB/s (2 ranks)";
  else
    note << "links NOT measured (--no-comm): 10 GB/s and 50 us are placeholders";
  c.note = note.str();
  c.calibrated = "none: every number measured on this machine";

  std::string text = "# Written by `loom profile`; format in src/loom/plan/cluster.h.\n" +
                     plan::to_toml(c);
  plan::parse_cluster(text, out_path);  // what we write must read back
  std::filesystem::path p(out_path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream f(out_path + ".tmp");
  if (!f || !(f << text) || !f.flush())
    LOOM_USAGE("cannot write '", out_path, "'; pass a writable path to --out");
  f.close();
  std::filesystem::rename(out_path + ".tmp", out_path);
  std::printf("loom profile: peak %.1f GFLOP/s (fp32, %lld thread), memory %.1f GB/s, ", peak,
              (long long)cfg.train.threads, c.memory_bandwidth / 1e9);
  if (link[1] > 0)
    std::printf("p2p %.1f us + %.2f GB/s\n", link[0] * 1e6, link[1] / 1e9);
  else
    std::printf("links not measured\n");
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}

}  // namespace loom::cli
