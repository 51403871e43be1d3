// The scheduler slice the MPI engine asks for when ranks time-share the cores.
#include "loom/common/thread_slice.h"

#include <gtest/gtest.h>

#include <thread>

using namespace std::chrono_literals;

TEST(ThreadSlice, SetReadBackInheritAndRestore) {
  const auto before = loom::thread_slice();
  if (!loom::set_thread_slice(10ms) || loom::thread_slice() == 0us)
    GTEST_SKIP() << "this kernel has no per-thread slices (before 6.12 it takes none)";
  EXPECT_EQ(loom::thread_slice(), 10ms);
  std::chrono::microseconds child{0};
  std::thread([&] { child = loom::thread_slice(); }).join();
  EXPECT_EQ(child, 10ms);  // a thread started now inherits it
  ASSERT_TRUE(loom::set_thread_slice(0us));
  EXPECT_NE(loom::thread_slice(), 10ms);
  EXPECT_EQ(loom::thread_slice(), before);  // the default again
}

TEST(ThreadSlice, UsableCoresWithinTheMachine) {
  const int n = loom::usable_cores();
  EXPECT_GE(n, 1);
  EXPECT_LE(unsigned(n), std::max(1u, std::thread::hardware_concurrency()));
}
