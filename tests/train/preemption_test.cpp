// Stop signals (train/preemption.h): taken by a thread of their own, never by the computation.
#include "loom/train/preemption.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace {

bool blocked_here(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

TEST(StopSignals, NeverInterruptTheComputingThreads) {
  loom::train::install_stop_handlers();
  loom::train::install_stop_handlers();  // again after the communication library: idempotent
  EXPECT_TRUE(loom::train::stop_handlers_installed());
  // The thread that installed them and every thread started after it (the communication
  // library's, the compute pools) have them blocked.
  EXPECT_TRUE(blocked_here(SIGTERM));
  EXPECT_TRUE(blocked_here(SIGINT));
  bool in_worker = false;
  std::thread([&] { in_worker = blocked_here(SIGTERM) && blocked_here(SIGINT); }).join();
  EXPECT_TRUE(in_worker);
  // A SIGTERM to the process is still recorded, by the thread that waits for it.
  ASSERT_EQ(loom::train::local_stop_signal(), 0);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (loom::train::local_stop_signal() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(loom::train::local_stop_signal(), SIGTERM);
  EXPECT_STREQ(loom::train::stop_signal_name(loom::train::local_stop_signal()), "SIGTERM");
}

}  // namespace
