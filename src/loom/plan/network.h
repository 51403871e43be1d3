#pragma once
// Alpha-beta network model over a cluster, and where ranks sit.
//  - Placement: world rank r = (pp_rank * dp + dp_rank) * tp + tp_rank, or with dp and pp
//    swapped (config::RankOrder, the runtime's parallel.placement); tensor parallelism is
//    innermost so a TP group stays inside a node (docs/architecture.md, Ranks and groups). Node of
//    a rank = r / devices_per_node (a `shared` cluster is one machine: every rank on node 0).
//  - A message of n bytes between two ranks: latency + n / bandwidth of the intra-node link
//    when both are on one node, else of the inter-node link (both per device and direction).
//  - Ring collectives on d ranks, buffer of n bytes (for all-gather: the gathered output; for
//    reduce-scatter: the input): all-reduce 2(d-1) steps, reduce-scatter and all-gather d-1
//    steps, each step latency + n / (d * bandwidth). So the bandwidth terms are
//    2(d-1)/d * n / bw and (d-1)/d * n / bw.
//  - Two levels when a group spans nodes with k > 1 members on each: all-reduce =
//    reduce-scatter inside the node (k) + all-reduce across nodes (one ring per local member on
//    n/k bytes, each on its own NIC) + all-gather inside the node; reduce-scatter = intra
//    reduce-scatter + inter reduce-scatter on n/k; all-gather = inter on n/k + intra.
#include <string_view>
#include <vector>

#include "loom/config/config.h"
#include "loom/plan/cluster.h"

namespace loom::plan {

struct Mesh {
  int dp = 1, pp = 1, tp = 1;
  config::RankOrder order = config::RankOrder::DpInside;
  int world() const { return dp * pp * tp; }
  int rank(int pp_rank, int dp_rank, int tp_rank = 0) const {
    return config::mesh_rank(order, dp, pp, tp, pp_rank, dp_rank, tp_rank);
  }
  std::vector<int> dp_group(int pp_rank, int tp_rank = 0) const;
  std::vector<int> tp_group(int pp_rank, int dp_rank = 0) const;
};

enum class Collective { AllReduce, ReduceScatter, AllGather };
std::string_view collective_name(Collective c);

class Network {
 public:
  explicit Network(const Cluster& c) : c_(c) {}
  int node_of(int rank) const { return c_.shared ? 0 : rank / c_.devices_per_node; }
  const Link& link(int a, int b) const { return node_of(a) == node_of(b) ? c_.intra : c_.inter; }
  double p2p_s(double bytes, int from, int to) const;
  double collective_s(Collective op, double bytes, const std::vector<int>& group) const;
  // One flat ring of d ranks over one link kind.
  static double ring_s(Collective op, double bytes, int d, const Link& l);

 private:
  const Cluster& c_;
};

}  // namespace loom::plan
