#pragma once
// Cutting a block list into pp * loops contiguous stages (no libtorch here).
//  - balanced: minimizes the cost of the most expensive stage (exact, by dynamic programming
//    over cut positions), from estimated FLOPs or measured times per block; in a V placement
//    the cost of the most expensive rank first (to 1e-9 of the total, by bisection);
//  - uniform: equal block counts (the first stages take one more when it does not divide);
//  - explicit: the user's cut points (block indices where stages 1.. start).
// Uneven cuts are normal (embedding and head cost differently from a layer).
#include <string>
#include <vector>

namespace loom::model {

struct Partition {
  std::vector<int> first;  // first[s] = index of stage s's first block; first.size() == stages
  int blocks = 0;
  int begin(int stage) const { return first[stage]; }
  int end(int stage) const { return stage + 1 < int(first.size()) ? first[stage + 1] : blocks; }
  std::string describe() const;  // "[0,2) [2,4) [4,6)"
};

// spec: "flops" | "uniform" | "a,b,c" cut points. costs: one per block (for "flops").
// v_placement: the stages go to ranks in a V (zbv, dualpipev: rank r holds stages r and
// stages - 1 - r); "flops" then minimizes the most expensive rank, the sum of its two
// stages (with the first and the last stage on one rank, balanced stages can leave it a
// fraction of the others' work), then (within 5 %) the largest rank memory at zbv's peak,
// then the most expensive stage (partition.cpp, VCut).
// Throws loom::UsageError: fewer blocks than stages, bad cut points (not increasing, out of
// range, wrong count).
Partition partition(const std::vector<double>& costs, int stages, const std::string& spec,
                    bool v_placement = false);

}  // namespace loom::model
