// GoogleTest main for multi-rank tests: MPI up before the tests, only rank 0 prints results,
// and a failure on any rank makes every rank's exit code non-zero.
#include <gtest/gtest.h>

#include <cstdlib>

#include "loom/comm/world.h"

int main(int argc, char** argv) {
  loom::comm::init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (loom::comm::world().rank() != 0 && !std::getenv("LOOM_TEST_ALL_RANKS")) delete listeners.Release(listeners.default_result_printer());
  int rc = RUN_ALL_TESTS();
  int any = rc;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  loom::comm::finalize();
  return any;
}
