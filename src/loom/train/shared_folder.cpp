#include "loom/train/shared_folder.h"

#include <filesystem>
#include <fstream>
#include <random>

#include "loom/comm/rank_hosts.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"

namespace loom::train {

namespace fs = std::filesystem;

std::vector<int> ranks_where(comm::Backend& world, bool flag) {
  std::vector<int32_t> set(static_cast<size_t>(world.size()), 0);
  set[static_cast<size_t>(world.rank())] = flag ? 1 : 0;
  world.all_reduce(set.data(), set.size(), comm::DType::Int32)->wait();
  std::vector<int> ranks;
  for (size_t r = 0; r < set.size(); ++r)
    if (set[r]) ranks.push_back(static_cast<int>(r));
  return ranks;
}

std::vector<int> ranks_not_sharing(comm::Backend& world, const std::string& dir) {
  if (world.size() == 1 || !comm::rank_hosts_known()) return {};
  // A token of this run's rank 0 (not a file an earlier run or another host left there).
  const fs::path probe = fs::path(dir) / ".loom-shared";
  int64_t token = 0;
  if (world.rank() == 0) {
    try {
      token = static_cast<int64_t>(std::random_device{}() >> 1) + 1;
      write_file_atomic(probe.string(), std::to_string(token));
    } catch (const Error&) {  // unwritable: the run's own writes say so; nothing is asked here
      token = 0;
    }
  }
  world.all_reduce(&token, 1, comm::DType::Int64, comm::ReduceOp::Max)->wait();
  if (token == 0) return {};
  std::ifstream in(probe);
  int64_t seen = 0;
  in >> seen;
  std::vector<int> blind = ranks_where(world, seen != token);
  if (world.rank() == 0) {
    std::error_code ec;
    fs::remove(probe, ec);
  }
  return blind;
}

void warn_if_not_shared(comm::Backend& world, const std::string& dir) {
  const std::vector<int> blind = ranks_not_sharing(world, dir);
  if (blind.empty() || world.rank() != 0) return;
  log::warn(detail::concat(
      "ranks ", comm::hosts_of(blind), " do not see the run folder '", dir,
      "' that rank 0 writes (the hosts do not share it): each rank saves its own checkpoint "
      "file there, but only rank 0's host gets the manifests; to resume, gather the hosts' "
      "folders into one that every host sees (or copy it whole to each host)"));
}

}  // namespace loom::train
