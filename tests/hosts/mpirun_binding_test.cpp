// How loom's mpirun launcher binds its ranks (launch/mpirun.h): an equal share of the CPUs each,
// none when the ranks outnumber them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/launch/mpirun.h"

namespace loom::launch {
namespace {

using Args = std::vector<std::string>;

TEST(MpirunBinding, EachRankAnEqualShareOfTheCpus) {
  EXPECT_EQ(binding_options(1, 2), (Args{"--use-hwthread-cpus", "--map-by", "slot:PE=2"}));
  EXPECT_EQ(binding_options(2, 2), (Args{"--use-hwthread-cpus", "--map-by", "slot:PE=1"}));
  EXPECT_EQ(binding_options(2, 32), (Args{"--use-hwthread-cpus", "--map-by", "slot:PE=16"}));
  EXPECT_EQ(binding_options(3, 16), (Args{"--use-hwthread-cpus", "--map-by", "slot:PE=5"}));
}

TEST(MpirunBinding, NoneWhenTheRanksOutnumberTheCpus) {
  EXPECT_EQ(binding_options(3, 2), (Args{"--bind-to", "none"}));
  EXPECT_EQ(binding_options(8, 1), (Args{"--bind-to", "none"}));
}

}  // namespace
}  // namespace loom::launch
