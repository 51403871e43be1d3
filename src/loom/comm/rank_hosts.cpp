#include "loom/comm/rank_hosts.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "loom/common/error.h"

namespace loom::comm {
namespace {

std::mutex mu;
std::vector<std::string> hosts;  // empty: not known, or a single host
// hosts is not empty: every communication call asks, so the usual answer costs no lock.
std::atomic<bool> known{false};

}  // namespace

void set_rank_hosts(std::vector<std::string> host_of_rank) {
  const bool one = std::all_of(host_of_rank.begin(), host_of_rank.end(),
                               [&](const std::string& h) { return h == host_of_rank.front(); });
  std::lock_guard<std::mutex> l(mu);
  hosts = one ? std::vector<std::string>{} : std::move(host_of_rank);
  known = !hosts.empty();
}

bool rank_hosts_known() {
  return known.load(std::memory_order_relaxed);
}

std::string host_of_rank(int world_rank) {
  if (!rank_hosts_known()) return "";
  std::lock_guard<std::mutex> l(mu);
  if (world_rank < 0 || world_rank >= static_cast<int>(hosts.size())) return "";
  return hosts[world_rank];
}

std::string hosts_of(const std::vector<int>& world_ranks) {
  std::string out;
  // Runs of consecutive ranks on one host: "0-1 on a, 2-3 on b".
  for (size_t i = 0; i < world_ranks.size();) {
    const std::string h = host_of_rank(world_ranks[i]);
    if (h.empty()) return "";
    size_t j = i;
    while (j + 1 < world_ranks.size() && world_ranks[j + 1] == world_ranks[j] + 1 &&
           host_of_rank(world_ranks[j + 1]) == h)
      ++j;
    out += detail::concat(out.empty() ? "" : ", ", world_ranks[i],
                          j > i ? detail::concat("-", world_ranks[j]) : "", " on ", h);
    i = j + 1;
  }
  return out;
}

}  // namespace loom::comm
