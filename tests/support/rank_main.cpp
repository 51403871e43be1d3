// GoogleTest main for multi-rank tests, under mpiexec (mpi backend) or `loom launch` (the
// backend in LOOM_COMM, gloo by default): the world is up before the tests, only rank 0 prints
// results, and a failure on any rank makes every rank's exit code non-zero.
#include <gtest/gtest.h>

#include <cstdlib>

#include "loom/comm/world.h"

int main(int argc, char** argv) {
  loom::comm::init(loom::comm::launch_backend(), &argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (loom::comm::world().rank() != 0 && !std::getenv("LOOM_TEST_ALL_RANKS"))
    delete listeners.Release(listeners.default_result_printer());
  int rc = RUN_ALL_TESTS();
  int any = rc;
  loom::comm::world()
      .all_reduce(&any, 1, loom::comm::DType::Int32, loom::comm::ReduceOp::Max)
      ->wait();
  loom::comm::finalize();
  return any;
}
