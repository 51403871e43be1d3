// Point-to-point latency and bandwidth, all-reduce bus bandwidth, and a rank's compute while
// another rank computes: two ranks of this executable, started by `mpirun -n 2` where loom has
// MPI, else (or with LOOM_COMM=gloo) by its own launcher over Gloo, as loom train would run.
#include "loom/profile/links.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/config/config.h"
#include "loom/model/block_timing.h"
#include "loom/model/cpu_gemm.h"
#include "loom/profile/calibration.h"
#include "loom/profile/child.h"
#include "loom/profile/profile.h"
#include "loom/profile/timing.h"

namespace loom::profile {
namespace {

// The slowdown of the layer (micro-batch b) on rank 0 while rank 1 computes it too, against
// rank 1 idle (asleep), the way two ranks of loom train share the machine: processes of their
// own, each bound to a core by mpirun. Windows of settle + budget seconds, alone / loaded /
// alone / loaded, timed from a barrier; rank 0 records the last `budget` seconds of each.
// Rank 0 returns loaded / alone (medians), the others 0.
double ranks_slowdown(const config::Config& cfg, int64_t b, double budget) {
  comm::Backend& w = comm::world();
  const int me = w.rank();
  torch::set_num_threads(1);
  model::use_cpu_gemm(cfg.train.cpu_gemm);  // the products' library a run uses
  model::Model m = model::build(cfg.model, cfg.train.seed);
  BlockJob j{
      "layer", b, m.blocks[1].get(), torch::randn({b, cfg.model.seq_len, cfg.model.width}), {}};
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
  return std::max(1.0, model::median_of(loaded) / model::median_of(alone));
}

// Every rank's layer (micro-batch b) alone, one rank after the other, then all ranks at once,
// the unit and the way a run calibrates between its steps (profile/calibration.h); with more
// ranks than cores. Returns the median over the samples of (mean at once) / (mean alone).
double ranks_time_shared(const config::Config& cfg, int64_t b, double budget) {
  torch::set_num_threads(1);
  model::use_cpu_gemm(cfg.train.cpu_gemm);
  Calibration cal(cfg.model, b, cfg.train.seed);
  comm::Backend& w = comm::world();
  cal.run(w, 1);  // warm-up
  const int samples = std::max(5, static_cast<int>(std::ceil(8 * budget)));
  std::vector<double> ratios;
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  for (int k = 0; k < samples; ++k) {
    const Calibration::Times t = cal.run(w);
    ratios.push_back(mean(t.loaded) / mean(t.alone));
  }
  return model::median_of(ratios);
}

// Runs `<self> profile --comm-child FILE args` on n ranks (mpirun -n n --oversubscribe as loom
// train --nproc starts them, or loom's launcher over Gloo) and reads the `count` numbers rank 0
// wrote to FILE; `what` names the measurement in the error when it fails.
std::vector<double> run_children(int n, const std::vector<std::string>& args, size_t count,
                                 const std::string& what) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("loom-profile-" + std::to_string(::getpid())))
          .string();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const bool mpi = comm::launch_backend() == comm::BackendKind::Mpi;
  const std::string ranks = std::to_string(n);
  std::vector<std::string> cmd;
  if (mpi) {
    cmd = {"mpirun", "-n", ranks, "--oversubscribe", "--quiet"};
    if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  } else {
    cmd = {self, "launch", "--nproc", ranks, "--comm", "gloo", "--"};
  }
  cmd.push_back(self);
  for (const char* s : {"profile", "--comm-child"}) cmd.push_back(s);
  cmd.push_back(file);
  cmd.insert(cmd.end(), args.begin(), args.end());
  bool ok = run_child(cmd);
  std::ifstream in(file);
  std::vector<double> v(count, 0.0);
  for (double& x : v) ok = ok && static_cast<bool>(in >> x);
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (!ok)
    throw Error(detail::concat(
        what, " (", mpi ? "mpirun -n " : "loom launch --comm gloo --nproc ", n,
        " of loom profile --comm-child) failed; run loom doctor, or pass --no-comm to skip it"));
  return v;
}

}  // namespace

std::vector<double> measure_comm() {
  comm::Backend& w = comm::world();
  const int me = w.rank();
  std::vector<double> out = {0, 0, 0};
  if (me > 1) {
    w.barrier()->wait();
    return out;
  }
  // Half the median round trip: a round trip the scheduler interrupted (the machine may be
  // busy with other work) does not move it.
  auto one_way = [&](size_t bytes) {
    std::vector<float> buf(std::max<size_t>(1, bytes / 4));
    const int reps = bytes <= (1 << 16) ? 200 : 20;
    std::vector<double> round_trips;
    w.barrier()->wait();
    for (int i = 0; i < reps; ++i) {
      auto t0 = Clock::now();
      if (me == 0) {
        w.send(buf.data(), buf.size(), comm::DType::Float32, 1, 7)->wait();
        w.recv(buf.data(), buf.size(), comm::DType::Float32, 1, 8)->wait();
      } else {
        w.recv(buf.data(), buf.size(), comm::DType::Float32, 0, 7)->wait();
        w.send(buf.data(), buf.size(), comm::DType::Float32, 0, 8)->wait();
      }
      round_trips.push_back(seconds(t0));
    }
    return model::median_of(round_trips) / 2;
  };
  const double lat = one_way(4);
  const size_t big = size_t(16) << 20;
  const double t_big = one_way(big);
  out[0] = lat;
  // The latency is subtracted only while it is a small part of the big message's time: when
  // it is not, the two were measured under different loads and big / t_big is the safe side.
  out[1] = big / (lat < 0.5 * t_big ? t_big - lat : t_big);
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

std::vector<double> comm_via_two_ranks(const std::vector<std::string>& slowdown_args) {
  return run_children(2, slowdown_args, 4, "the communication measurement");
}

double time_shared_via_ranks(int n, const std::string& config, int64_t micro_batch,
                             double seconds) {
  return run_children(n,
                      {"--config", config, "--time-shared-mb", std::to_string(micro_batch),
                       "--seconds", detail::concat(seconds)},
                      1, "the measurement of ranks outnumbering the cores")[0];
}

void run_link_child(const LinkChild& o) {
  comm::init(comm::launch_backend(), nullptr, nullptr);
  std::vector<double> v;
  if (o.time_shared_mb > 0) {
    v = {ranks_time_shared(config::load_file(o.config), o.time_shared_mb, o.seconds)};
  } else {
    v = measure_comm();
    v.push_back(0);
    if (o.slowdown_mb > 0 && comm::world().size() == 2)
      v[3] = ranks_slowdown(config::load_file(o.config), o.slowdown_mb, o.seconds);
  }
  if (comm::world().rank() == 0) {
    std::ostringstream out;
    out.precision(9);
    for (double x : v) out << x << " ";
    out << "\n";
    write_file_atomic(o.file, out.str());
  }
  comm::finalize();
}

}  // namespace loom::profile
