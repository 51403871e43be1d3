#include "loom/launch/placement.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "loom/comm/node_store.h"
#include "loom/common/error.h"

namespace loom::launch {
namespace {

// "0-1, 4" from sorted numbers.
std::string ranges(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += detail::concat(v[i]);
    if (j > i) out += detail::concat('-', v[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> gather_hosts(comm::Backend& world) {
  constexpr size_t kLen = 64;  // a host name, cut to fit
  std::vector<char> mine(kLen, 0), all(kLen * world.size(), 0);
  const std::string h = comm::host_name();
  std::memcpy(mine.data(), h.data(), std::min(h.size(), kLen - 1));
  world.all_gather(mine.data(), all.data(), kLen, comm::DType::UInt8)->wait();
  std::vector<std::string> out;
  for (int r = 0; r < world.size(); ++r) out.emplace_back(all.data() + r * kLen);
  return out;
}

std::string placement_line(const std::vector<std::string>& host_of_rank, int dp, int pp, int tp,
                           config::RankOrder order) {
  auto rank = [&](int s, int d, int t) { return config::mesh_rank(order, dp, pp, tp, s, d, t); };
  // The pipeline rank of each world rank.
  std::vector<int> stage_of(host_of_rank.size(), 0);
  for (int s = 0; s < pp; ++s)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < tp; ++t) stage_of.at(rank(s, d, t)) = s;
  std::vector<std::string> hosts;  // in order of their first rank
  for (const auto& h : host_of_rank)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  if (hosts.size() < 2) return "";
  std::string line = detail::concat("placement on ", hosts.size(), " hosts:");
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::vector<int> ranks, stages;
    for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
      if (host_of_rank[r] != hosts[i]) continue;
      ranks.push_back(r);
      const int stage = stage_of[r];
      if (std::find(stages.begin(), stages.end(), stage) == stages.end()) stages.push_back(stage);
    }
    std::sort(stages.begin(), stages.end());
    line += detail::concat(i ? ", " : " ", hosts[i], " ", ranks.size() == 1 ? "rank " : "ranks ",
                           ranges(ranks),
                           pp > 1 ? (stages.size() == 1 ? " (pp stage " : " (pp stages ") : "",
                           pp > 1 ? ranges(stages) + ")" : "");
  }
  // A dp group: the ranks of one (pp_rank, tp_rank).
  int split = 0;
  for (int s = 0; s < pp; ++s)
    for (int t = 0; t < tp; ++t) {
      std::set<std::string> on;
      for (int d = 0; d < dp; ++d) on.insert(host_of_rank[rank(s, d, t)]);
      split += on.size() > 1;
    }
  if (dp > 1)
    line += split == 0 ? "; every dp group inside one host"
                       : detail::concat("; ", split, " of ", pp * tp, " dp groups across hosts");
  return line;
}

}  // namespace loom::launch
