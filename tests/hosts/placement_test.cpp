// The placement line (launch/placement.h): which ranks and pipeline stages each host holds,
// and whether the dp groups stay inside a host, for the layouts of docs/multi-host.md.
#include "loom/launch/placement.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace loom::launch
