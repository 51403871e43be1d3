// The placement line (launch/placement.h): which ranks and pipeline stages each host holds,
// and whether the dp groups stay inside a host, for the layouts of docs/multi-host.md.
#include "loom/launch/placement.h"

#include <gtest/gtest.h>

#include "loom/comm/rank_hosts.h"

namespace loom::launch {
namespace {

TEST(Placement, OneHostSaysNothing) {
  EXPECT_EQ(placement_line({"a", "a", "a", "a"}, 2, 2, 1), "");
}

TEST(Placement, PipelineAcrossHostsDpInside) {
  EXPECT_EQ(placement_line({"a", "a", "b", "b"}, 2, 2, 1),
            "placement on 2 hosts: a ranks 0-1 (pp stage 0), b ranks 2-3 (pp stage 1); every dp "
            "group inside one host");
}

TEST(Placement, DpAcrossHosts) {
  EXPECT_EQ(placement_line({"a", "a", "b", "b"}, 4, 1, 1),
            "placement on 2 hosts: a ranks 0-1, b ranks 2-3; 1 of 1 dp groups across hosts");
}

TEST(Placement, RanksDealtRoundRobin) {
  // mpirun --map-by node: every dp group and every stage spans both hosts.
  EXPECT_EQ(placement_line({"a", "b", "a", "b"}, 2, 2, 1),
            "placement on 2 hosts: a ranks 0,2 (pp stages 0-1), b ranks 1,3 (pp stages 0-1); 2 of "
            "2 dp groups across hosts");
}

TEST(Placement, TensorParallelInsideTheDpLayout) {
  // dp 2 x tp 2 on 2 hosts of 2: host a has (dp 0, tp 0-1): the dp groups (one per tp rank)
  // cross the hosts.
  EXPECT_EQ(placement_line({"a", "a", "b", "b"}, 2, 1, 2),
            "placement on 2 hosts: a ranks 0-1, b ranks 2-3; 2 of 2 dp groups across hosts");
}

TEST(Placement, PipelineInsideHostsDpAcross) {
  // --placement pipeline-inside: pp 2 x dp 2 on 2 hosts of 2: each host holds a whole
  // pipeline (both stages); the dp groups cross the hosts.
  EXPECT_EQ(placement_line({"a", "a", "b", "b"}, 2, 2, 1, config::RankOrder::PipelineInside),
            "placement on 2 hosts: a ranks 0-1 (pp stages 0-1), b ranks 2-3 (pp stages 0-1); 2 "
            "of 2 dp groups across hosts");
  // With tp 2 (8 ranks, 2 hosts of 4): rank = (dp_rank * 2 + pp_rank) * 2 + tp_rank.
  EXPECT_EQ(placement_line({"a", "a", "a", "a", "b", "b", "b", "b"}, 2, 2, 2,
                           config::RankOrder::PipelineInside),
            "placement on 2 hosts: a ranks 0-3 (pp stages 0-1), b ranks 4-7 (pp stages 0-1); 4 "
            "of 4 dp groups across hosts");
}

TEST(Placement, MeshRankOfBothOrders) {
  using config::RankOrder;
  // dp 2 x pp 3 x tp 2: (pp 2, dp 1, tp 1).
  EXPECT_EQ(config::mesh_rank(RankOrder::DpInside, 2, 3, 2, 2, 1, 1), (2 * 2 + 1) * 2 + 1);
  EXPECT_EQ(config::mesh_rank(RankOrder::PipelineInside, 2, 3, 2, 2, 1, 1), (1 * 3 + 2) * 2 + 1);
  // Each order numbers the 12 ranks once.
  for (RankOrder o : {RankOrder::DpInside, RankOrder::PipelineInside}) {
    std::vector<int> seen(12, 0);
    for (int s = 0; s < 3; ++s)
      for (int d = 0; d < 2; ++d)
        for (int t = 0; t < 2; ++t) ++seen.at(config::mesh_rank(o, 2, 3, 2, s, d, t));
    EXPECT_EQ(seen, std::vector<int>(12, 1));
  }
}

// What a communication failure says about where its peers are (comm/rank_hosts.h).
TEST(Placement, HostsOfRanksForMessages) {
  comm::set_rank_hosts({"a", "a", "b", "b"});
  EXPECT_EQ(comm::host_of_rank(2), "b");
  EXPECT_EQ(comm::host_of_rank(4), "");
  EXPECT_EQ(comm::hosts_of({0, 1, 2, 3}), "0-1 on a, 2-3 on b");
  EXPECT_EQ(comm::hosts_of({0, 2}), "0 on a, 2 on b");
  EXPECT_EQ(comm::hosts_of({1, 2}), "1 on a, 2 on b");
  comm::set_rank_hosts({"a", "a"});  // one host: nothing to say
  EXPECT_EQ(comm::host_of_rank(0), "");
  EXPECT_EQ(comm::hosts_of({0, 1}), "");
  comm::set_rank_hosts({});
}

}  // namespace
}  // namespace loom::launch
