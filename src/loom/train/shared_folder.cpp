#include "loom/train/shared_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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

std::vector<int> say_if_not_shared(comm::Backend& world, const std::string& dir) {
  std::vector<int> blind = ranks_not_sharing(world, dir);
  if (!blind.empty() && world.rank() == 0)
    log::info0(detail::concat(
        "ranks ", comm::hosts_of(blind), " do not see the run folder '", dir,
        "' that rank 0 writes (the hosts do not share it): each host keeps the manifests, its "
        "ranks' checkpoint files and a copy of another host's; a resume fetches what a host "
        "lacks from the others"));
  return blind;
}

std::vector<int> host_groups(int world) {
  std::vector<int> group(static_cast<size_t>(world), 0);
  if (!comm::rank_hosts_known()) return group;
  std::map<std::string, int> lowest;
  for (int r = 0; r < world; ++r)
    group[r] = lowest.try_emplace(comm::host_of_rank(r), r).first->second;
  return group;
}

std::vector<int> folder_groups(int world, const std::vector<int>& blind) {
  std::vector<int> group = host_groups(world);
  for (int r = 0; r < world; ++r)
    if (!std::binary_search(blind.begin(), blind.end(), r)) group[r] = 0;
  return group;
}

}  // namespace loom::train
