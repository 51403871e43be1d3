// loom profile: the flags; the measurements and the cluster file are src/loom/profile/.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/config/config.h"
#include "loom/flags/flags.h"
#include "loom/plan/cluster.h"
#include "loom/profile/device_profile.h"
#include "loom/profile/profile.h"

namespace loom::cli {
namespace {

const char* kProfileHelp =
    R"(usage: loom profile [--out clusters/this-machine.toml] [--config configs/gpt-fortunes.toml]
                    [--micro-batch-sizes 1,2,4,8,16] [--tp 2] [--seconds 1] [--no-comm]
                    [--alone]
       loom profile --device cuda [--base clusters/h200.toml] [--out FILE] [--seconds 1]

Measures this machine (matrix products, memory bandwidth, the gpt or llama blocks of the
config's model at each micro-batch size, the AdamW step, and point-to-point latency and
bandwidth between two ranks: `mpirun -n 2` where loom has MPI, else (or with LOOM_COMM=gloo)
its own launcher over Gloo) and writes a cluster file for loom simulate and loom plan.
Blocks are timed alone, 4 micro-batches in flight as a pipeline stage keeps them (their
forwards with the graphs alive, then their backwards); then the layer, in windows of seconds,
alone and while every other core runs it too (as the other ranks of a training run do: they
share memory bandwidth, caches and, on a virtual machine, maybe the physical core); the ratio
is written as each block's loaded_slowdown. Then twice as many ranks as cores time the layer
alone and all at once, as a run calibrates between its steps: their time beyond a fair share
of the cores (switching between ranks, caches) is written as the node's oversubscribed, which
the simulator applies when ranks outnumber the cores, and a 12-step loom train on two ranks
gives the CPU a run spends beside its compute (communication engines, optimizer,
bookkeeping), written as the node's runtime_cpu, which such cores also run. A stack of the
model's layers run as one action per micro-batch and as one action per layer gives what an
action costs beyond its blocks (the layer's action_ms). --alone skips the measurements under
load (1), --no-comm those on several ranks. Run it on an
otherwise idle machine: what else runs is measured too. --tp lists tensor-parallel degrees
whose shard of each block is timed too (the shard's compute alone; the simulator adds the
collectives): degrees that do not divide the model's heads and width are skipped, 1 times
none.

--device cuda measures GPU 0 instead: bf16 matrix products by size (the GEMM efficiency
curve, against the base file's bf16 peak), a large copy (elementwise, against its memory
bandwidth), the fused causal attention kernel forward and backward, and the AdamW step; it
writes the base file (default clusters/h200.toml: the specification, node and links a single
GPU cannot measure) with those replaced, to --out (default: the base's name + "-measured").
)";

// clusters/h200.toml -> clusters/h200-measured.toml
std::string measured_name(const std::string& base) {
  const size_t dot = base.rfind(".toml");
  return (dot == std::string::npos ? base : base.substr(0, dot)) + "-measured.toml";
}

constexpr const char* kOutFix = "pass a writable file path such as clusters/mine.toml to --out";

// --seconds: the measurement window, more than 0.
double seconds(const flags::Parsed& a) {
  const double s = config::parse_duration(a.get("seconds"));
  if (!(s > 0)) LOOM_USAGE("--seconds must be more than 0, got '", a.get("seconds"), "'; e.g. 1s");
  return s;
}

}  // namespace

int profile_command(const std::vector<std::string>& args) {
  const flags::Parsed a =
      flags::parse(args, {"profile",
                          {{"out", "clusters/this-machine.toml"},
                           {"config", "configs/gpt-fortunes.toml"},
                           {"micro-batch-sizes", "1,2,4"},
                           {"tp", "2"},
                           {"seconds", "1"},
                           {"no-comm", ""},
                           {"alone", ""},
                           {"device", "cpu|cuda"},
                           {"base", "clusters/h200.toml"},
                           // internal: the ranks of the link measurement (profile::LinkChild)
                           {"comm-child", "FILE", true},
                           {"slowdown-mb", "4", true},
                           {"time-shared-mb", "4", true}}});
  if (a.help) {
    std::cout << kProfileHelp;
    return 0;
  }
  if (a.has("comm-child")) {
    profile::LinkChild child;
    child.file = a.get("comm-child");
    child.config = a.get("config", "");
    if (a.has("seconds")) child.seconds = seconds(a);
    if (a.has("slowdown-mb"))
      child.slowdown_mb = flags::to_int("slowdown-mb", a.get("slowdown-mb"), 1, 1 << 16);
    if (a.has("time-shared-mb"))
      child.time_shared_mb = flags::to_int("time-shared-mb", a.get("time-shared-mb"), 1, 1 << 16);
    profile::run_link_child(child);
    return 0;
  }
  const std::string device = a.get("device", "cpu");
  if (device != "cpu" && device != "cuda")
    LOOM_USAGE("--device must be cpu or cuda, got '", device, "'");
  if (device == "cpu" && a.has("base"))
    LOOM_USAGE("--base is the specification a GPU profile starts from; add --device cuda");
  if (device == "cuda") {
    const std::string base_path = a.get("base", "clusters/h200.toml");
    plan::Cluster base = plan::load_cluster(base_path);  // first: a bad file fails fast
    const std::string out_path = a.get("out", measured_name(base_path));
    const double budget = a.has("seconds") ? seconds(a) : 1.0;
    check_writable_path(out_path, kOutFix, true);  // before a minute of measuring
    profile::require_gpu();
    std::cerr << "loom profile: bf16 products, a copy, the attention kernel and AdamW on GPU 0\n";
    const profile::DeviceMeasurements m = profile::measure_cuda(budget);
    const plan::Cluster c = profile::device_cluster(std::move(base), m, profile::profile_date());
    profile::write_cluster(c, out_path);
    std::string attention;
    for (const plan::AttentionKernel& k : c.attention)
      attention += detail::concat(attention.empty() ? "" : ", ", std::lround(100 * k.forward),
                                  "% / ", std::lround(100 * k.backward), "% (heads of ",
                                  k.head_size, ", s ", k.seq_len, ")");
    std::printf(
        "%s: bf16 products %.0f%% of peak at n = %.0f, copy %.0f%% of %.0f GB/s, "
        "attention forward / backward %s of peak\nwrote %s\n",
        m.device.c_str(), 100 * c.gemm_efficiency.back(), c.gemm_size.back(),
        100 * c.elementwise_efficiency, c.memory_bandwidth / 1e9, attention.c_str(),
        out_path.c_str());
    return 0;
  }
  profile::Options o;
  const std::string out_path = a.get("out", "clusters/this-machine.toml");
  o.config = a.get("config", o.config);
  if (a.has("micro-batch-sizes")) {
    o.micro_batch_sizes.clear();
    for (const std::string& item : flags::split_list(a.get("micro-batch-sizes")))
      o.micro_batch_sizes.push_back(flags::to_int("micro-batch-sizes", item, 1, 1 << 16));
    if (o.micro_batch_sizes.empty())
      LOOM_USAGE("--micro-batch-sizes needs at least one size, e.g. --micro-batch-sizes 1,2,4");
  }
  if (a.has("tp")) {
    o.tp_degrees.clear();
    for (const std::string& item : flags::split_list(a.get("tp")))
      o.tp_degrees.push_back(flags::to_int("tp", item, 1, 1 << 10));
  }
  if (a.has("seconds")) o.seconds = seconds(a);
  o.links = !a.has("no-comm");
  o.alone = a.has("alone");
  check_writable_path(out_path, kOutFix, true);  // before a minute of measuring
  std::optional<profile::Measured> m = profile::measure(o);
  if (!m) return 0;  // a rank other than 0 under mpirun
  profile::write_cluster(m->cluster, out_path);
  std::printf("%s\nwrote %s\n", m->summary.c_str(), out_path.c_str());
  return 0;
}

}  // namespace loom::cli
