// Alpha-beta links and ring collectives against totals computed by hand.
#include "loom/plan/network.h"

#include <gtest/gtest.h>

namespace loom::plan {
namespace {

// 4 devices per node; intra 100 GB/s, 1 us; inter 10 GB/s, 10 us.
Cluster two_level() {
  Cluster c;
  c.name = "test";
  c.devices_per_node = 4;
  c.intra = {100e9, 1.0, 1e-6};
  c.inter = {10e9, 1.0, 10e-6};
  return c;
}

TEST(Network, Placement) {
  Mesh m{2, 3, 4};  // dp, pp, tp
  EXPECT_EQ(m.world(), 24);
  EXPECT_EQ(m.rank(0, 0, 0), 0);
  EXPECT_EQ(m.rank(0, 1, 0), 4);
  EXPECT_EQ(m.rank(1, 0, 0), 8);
  EXPECT_EQ(m.dp_group(2, 1), (std::vector<int>{17, 21}));
  EXPECT_EQ(m.tp_group(1, 1), (std::vector<int>{12, 13, 14, 15}));
}

TEST(Network, PointToPoint) {
  Cluster c = two_level();
  Network n(c);
  EXPECT_DOUBLE_EQ(n.p2p_s(1e9, 0, 3), 1e-6 + 0.01);  // same node
  EXPECT_DOUBLE_EQ(n.p2p_s(1e9, 3, 4), 10e-6 + 0.1);  // across nodes
  EXPECT_DOUBLE_EQ(n.p2p_s(1e9, 2, 2), 0.0);
}

TEST(Network, FlatRings) {
  Cluster c = two_level();
  Network n(c);
  // 4 ranks of one node, 1 GB: all-reduce 2*3 steps of (1 us + 0.25 GB / 100 GB/s).
  EXPECT_NEAR(n.collective_s(Collective::AllReduce, 1e9, {0, 1, 2, 3}), 6 * (1e-6 + 2.5e-3), 1e-15);
  EXPECT_NEAR(n.collective_s(Collective::ReduceScatter, 1e9, {0, 1, 2, 3}), 3 * (1e-6 + 2.5e-3),
              1e-15);
  EXPECT_NEAR(n.collective_s(Collective::AllGather, 1e9, {0, 1, 2, 3}), 3 * (1e-6 + 2.5e-3), 1e-15);
  // One rank per node on 2 nodes: 2 steps of (10 us + 0.5 GB / 10 GB/s).
  EXPECT_NEAR(n.collective_s(Collective::AllReduce, 1e9, {0, 4}), 2 * (10e-6 + 0.05), 1e-15);
  EXPECT_EQ(n.collective_s(Collective::AllReduce, 1e9, {5}), 0.0);
}

// 8 ranks on 2 nodes of 4: reduce-scatter in the node (3 steps of 1 us + 0.25 GB at 100 GB/s),
// all-reduce of the 0.25 GB shard across the 2 nodes (2 steps of 10 us + 0.125 GB at 10 GB/s),
// all-gather in the node (as the reduce-scatter).
TEST(Network, TwoLevelAllReduce) {
  Cluster c = two_level();
  Network n(c);
  const std::vector<int> g = {0, 1, 2, 3, 4, 5, 6, 7};
  const double intra = 3 * (1e-6 + 2.5e-3);
  const double inter = 2 * (10e-6 + 0.0125);
  EXPECT_NEAR(n.collective_s(Collective::AllReduce, 1e9, g), intra + inter + intra, 1e-15);
  EXPECT_NEAR(n.collective_s(Collective::ReduceScatter, 1e9, g), intra + inter / 2, 1e-15);
  EXPECT_NEAR(n.collective_s(Collective::AllGather, 1e9, g), inter / 2 + intra, 1e-15);
  // Bandwidth terms of a flat ring: 2(d-1)/d and (d-1)/d of n / bw.
}

}  // namespace
}  // namespace loom::plan
