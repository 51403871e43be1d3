// comm/wait_thread.h: operations waited on in order by a thread of their own, their failures
// handed to the caller, and a destructor that does not wait for what was never begun.
#include "loom/comm/wait_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "loom/common/error.h"

namespace loom::comm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Complete once `done` is set (a poll never sees it, as with Gloo); `fail` makes it fail.
class FlagWork : public Work {
 public:
  FlagWork(std::string what, std::chrono::milliseconds timeout, const std::atomic<bool>& done,
           bool fail = false)
      : Work(std::move(what), timeout), done_(done), fail_(fail) {}
  std::atomic<int> waits{0};

 protected:
  bool completed() override { return false; }
  bool block_until(Clock::time_point deadline) override {
    ++waits;
    while (!done_) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    if (fail_) throw std::runtime_error("connection closed by peer");
    return true;
  }

 private:
  const std::atomic<bool>& done_;
  bool fail_;
};

TEST(WaitThread, WaitsInOrderAndCounts) {
  std::atomic<bool> first{false}, second{false};
  auto a = std::make_shared<FlagWork>("send(a)", 10s, first);
  auto b = std::make_shared<FlagWork>("send(b)", 10s, second);
  WaitThread t;
  t.add(a);
  t.add(b);
  EXPECT_EQ(t.waited(), 0u);
  second = true;  // the second completes first: still counted after the first only
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(t.waited(), 0u);
  EXPECT_EQ(b->waits, 0);
  first = true;
  t.wait_for(2);
  EXPECT_EQ(t.waited(), 2u);
  EXPECT_EQ(a->waits, 1);
  EXPECT_EQ(b->waits, 1);
}

TEST(WaitThread, AFailureReachesTheCallerAndStopsTheWaiting) {
  std::atomic<bool> done{true};
  auto ok = std::make_shared<FlagWork>("recv(ok)", 10s, done);
  auto broken = std::make_shared<FlagWork>("recv(broken)", 10s, done, true);
  auto after = std::make_shared<FlagWork>("recv(after)", 10s, done);
  WaitThread t;
  t.add(ok);
  t.add(broken);
  t.add(after);
  try {
    t.wait_for(3);
    FAIL() << "expected the failure";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("communication failed: recv(broken): connection closed"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(t.waited(), Error);  // and every later ask
  EXPECT_EQ(after->waits, 0);       // nothing waited on after it
}

TEST(WaitThread, ATimeoutIsAFailureAndTheDestructorWaitsOnlyForTheWaitInProgress) {
  std::atomic<bool> never{false};
  const auto t0 = Clock::now();
  {
    WaitThread t;
    t.add(std::make_shared<FlagWork>("recv(slow)", 200ms, never));
    t.add(std::make_shared<FlagWork>("recv(next)", 10s, never));
    std::this_thread::sleep_for(20ms);
    // Destroyed while the first wait runs: returns when it timed out, not the second's 10 s.
  }
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 5s);

  WaitThread t;
  t.add(std::make_shared<FlagWork>("recv(slow)", 100ms, never));
  try {
    t.wait_for(1);
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("communication timeout: recv(slow)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom::comm
