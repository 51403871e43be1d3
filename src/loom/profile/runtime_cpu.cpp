#include "loom/profile/runtime_cpu.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "loom/model/block_timing.h"
#include "loom/profile/child.h"

namespace loom::profile {
namespace {

// The number after `"key": ` in one line of metrics.jsonl (flat objects of numbers), or -1.
double field(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = line.find(quoted);
  if (at == std::string::npos) return -1;
  return std::strtod(line.c_str() + at + quoted.size(), nullptr);
}

}  // namespace

double runtime_cpu_of_a_run(const std::string& config, int64_t layers, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("loom-profile-run-" + std::to_string(::getpid()));
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  constexpr int kSkipped = 4;
  std::vector<std::string> cmd = {self, "train", "--config", config, "--nproc", "2"};
  cmd.insert(cmd.end(), {layers >= 2 ? "--pp" : "--dp", "2", "--schedule", "1f1b"});
  cmd.insert(cmd.end(), {"--steps", std::to_string(kShortRunSteps), "--eval_every", "0"});
  cmd.insert(cmd.end(), {"--final-eval", "false"});
  cmd.insert(cmd.end(), {"--output.dir", dir.string(), "--output.progress", "false"});
  cmd.insert(cmd.end(), {"--output.calibrate_every", "0"});
  std::error_code ec;
  fs::remove_all(dir, ec);  // a folder left by an earlier process of this id is not this run
  const bool ran = run_child(cmd, /*quiet=*/true);  // its output is not the profile's
  std::vector<double> ratios;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const double step = field(line, "step"), cpu = field(line, "world_cpu_s"),
                 compute = field(line, "world_compute_cpu_s");
    if (step > kSkipped && cpu > 0 && compute > 0) ratios.push_back(cpu / compute);
  }
  fs::remove_all(dir, ec);
  if (!ran || ratios.empty()) {
    *why = "a short run (loom train --config " + config + " --nproc 2 " +
           (layers >= 2 ? "--pp" : "--dp") + " 2) failed; run it to see why";
    return 0;
  }
  return std::max(1.0, model::median_of(ratios));
}

}  // namespace loom::profile
