// loom profile: the flags; the measurements and the cluster file are src/loom/profile/.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "loom/cli/args.h"
#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/profile/profile.h"

namespace loom::cli {
namespace {

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
  if (a.flags.count("comm-child")) {  // internal: the ranks of the link measurement
    profile::LinkChild child;
    child.file = a.flags.at("comm-child");
    if (a.flags.count("slowdown-mb")) {
      child.config = a.flags.at("config");
      child.slowdown_mb = to_int("slowdown-mb", a.flags.at("slowdown-mb"), 1, 1 << 16);
      if (a.flags.count("seconds")) child.seconds = config::parse_duration(a.flags.at("seconds"));
    }
    profile::run_link_child(child);
    return 0;
  }
  profile::Options o;
  const std::string out_path =
      a.flags.count("out") ? a.flags.at("out") : "clusters/this-machine.toml";
  if (a.flags.count("config")) o.config = a.flags.at("config");
  if (a.flags.count("micro-batch-sizes")) {
    o.micro_batch_sizes.clear();
    std::stringstream in(a.flags.at("micro-batch-sizes"));
    std::string item;
    while (std::getline(in, item, ','))
      o.micro_batch_sizes.push_back(to_int("micro-batch-sizes", item, 1, 1 << 16));
  }
  if (a.flags.count("seconds")) o.seconds = config::parse_duration(a.flags.at("seconds"));
  o.links = !a.flags.count("no-comm");
  o.alone = a.flags.count("alone") > 0;
  std::optional<profile::Measured> m = profile::measure(o);
  if (!m) return 0;  // a rank other than 0 under mpirun
  profile::write_cluster(m->cluster, out_path);
  std::printf("%s\nwrote %s\n", m->summary.c_str(), out_path.c_str());
  return 0;
}

}  // namespace loom::cli
