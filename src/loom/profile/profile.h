#pragma once
// Measures this machine and writes a cluster file (plan/cluster.h) that `loom simulate` and
// `loom plan` read. What is measured, and how: profile.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/plan/cluster.h"

namespace loom::profile {

struct Options {
  std::string config = "configs/gpt-fortunes.toml";  // a GPT `loom train` configuration
  std::vector<int64_t> micro_batch_sizes = {1, 2, 4, 8, 16};
  double seconds = 1.0;  // time budget of each measurement
  bool links = true;     // point-to-point between two ranks (mpirun -n 2, or loom launch)
  bool alone = false;    // skip the slowdown with every core busy (written as 1)
  // Tensor-parallel degrees whose shard of each block is timed too (with a group in which
  // nothing moves: the shard's compute only); degrees that do not divide the model's heads
  // and width are skipped.
  std::vector<int64_t> tp_degrees = {2};
};

struct Measured {
  plan::Cluster cluster;
  std::string summary;  // one line: peak GFLOP/s, memory bandwidth, links
};

// Progress goes to stderr. Under mpirun with two ranks or more the ranks measure the link
// between them first; then only rank 0 goes on, the others return nullopt.
std::optional<Measured> measure(const Options& o);

// The local date and minute a profile's note names ("2026-12-02 18:00").
std::string profile_date();

// Writes `c` to `path` (folders created, replaced atomically) after checking it reads back.
void write_cluster(const plan::Cluster& c, const std::string& path);

// The ranks that measure() starts for the link measurement, as
//   mpirun -n 2 <this executable> profile --comm-child FILE  (or under loom launch, Gloo)
//                                  [--config C --slowdown-mb B --seconds S]
// or, for ranks outnumbering the cores, on 2C ranks with --time-shared-mb B instead.
// so the executable must route those flags here. Rank 0 writes the numbers to `file`.
struct LinkChild {
  std::string file;
  std::string config;       // with slowdown_mb: the layer whose slowdown is measured
  int64_t slowdown_mb = 0;  // micro-batch size of that layer; 0: no slowdown measured
  // > 0: no link; every rank times that layer alone and all at once (time_shared_via_ranks)
  int64_t time_shared_mb = 0;
  double seconds = 1.0;
};
void run_link_child(const LinkChild& o);

}  // namespace loom::profile
