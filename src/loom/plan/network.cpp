#include "loom/plan/network.h"

#include <algorithm>
#include <map>

#include "loom/common/error.h"

namespace loom::plan {

std::vector<int> Mesh::dp_group(int pp_rank, int tp_rank) const {
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(rank(pp_rank, d, tp_rank));
  return g;
}

std::vector<int> Mesh::tp_group(int pp_rank, int dp_rank) const {
  std::vector<int> g;
  for (int t = 0; t < tp; ++t) g.push_back(rank(pp_rank, dp_rank, t));
  return g;
}

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all-reduce";
    case Collective::ReduceScatter: return "reduce-scatter";
    default: return "all-gather";
  }
}

double Network::p2p_s(double bytes, int from, int to) const {
  if (from == to || bytes <= 0) return 0;
  const Link& l = link(from, to);
  return l.latency + bytes / l.effective_bandwidth();
}

double Network::ring_s(Collective op, double bytes, int d, const Link& l) {
  if (d <= 1 || bytes <= 0) return 0;
  const double steps = (op == Collective::AllReduce ? 2.0 : 1.0) * (d - 1);
  return steps * (l.latency + bytes / d / l.effective_bandwidth());
}

double Network::collective_s(Collective op, double bytes, const std::vector<int>& group) const {
  const int d = static_cast<int>(group.size());
  if (d <= 1 || bytes <= 0) return 0;
  std::map<int, int> per_node;
  for (int r : group) ++per_node[node_of(r)];
  const int nodes = static_cast<int>(per_node.size());
  int k = 0;
  for (const auto& [n, count] : per_node) k = std::max(k, count);
  if (nodes == 1) return ring_s(op, bytes, d, c_.intra);
  if (k == 1) return ring_s(op, bytes, d, c_.inter);
  // Two levels; k members per node (the fullest node sets the pace).
  const double shard = bytes / k;
  switch (op) {
    case Collective::AllReduce:
      return ring_s(Collective::ReduceScatter, bytes, k, c_.intra) +
             ring_s(Collective::AllReduce, shard, nodes, c_.inter) +
             ring_s(Collective::AllGather, bytes, k, c_.intra);
    case Collective::ReduceScatter:
      return ring_s(Collective::ReduceScatter, bytes, k, c_.intra) +
             ring_s(Collective::ReduceScatter, shard, nodes, c_.inter);
    default:
      return ring_s(Collective::AllGather, shard, nodes, c_.inter) +
             ring_s(Collective::AllGather, bytes, k, c_.intra);
  }
}

}  // namespace loom::plan
