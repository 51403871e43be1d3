// mpirun's stderr as loom passes it on (launch/mpirun_stderr.h): the ranks' lines, not Open
// MPI's banners about the job's end, and the rank a banner says was killed.
#include "loom/launch/mpirun_stderr.h"

#include <gtest/gtest.h>

#include <string>

namespace loom::launch {
namespace {

const std::string kFrame(74, '-');

// What the filter passes on of `in`, fed `split` bytes at a time, and what it found.
struct Passed {
  std::string out;
  int killed_rank = -1, killed_signal = 0;
};
Passed passed(const std::string& in, size_t split = 7) {
  Passed p;
  MpirunStderr err([&](std::string_view s) { p.out.append(s); });
  for (size_t at = 0; at < in.size(); at += split) err.feed(std::string_view(in).substr(at, split));
  err.finish();
  p.killed_rank = err.killed_rank();
  p.killed_signal = err.killed_signal();
  return p;
}

TEST(MpirunStderr, KilledRankNamedBannersLeftOut) {
  const std::string in =
      "step 2/3  loss 5.66\n[rank 1] LOOM_FAULT_RANK: killing this rank at step 2\n" + kFrame +
      "\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code. Per "
      "user-direction, the job has been aborted.\n" +
      kFrame + "\n" + kFrame +
      "\nmpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n" +
      kFrame + "\n";
  const Passed p = passed(in);
  EXPECT_EQ(p.out, "step 2/3  loss 5.66\n[rank 1] LOOM_FAULT_RANK: killing this rank at step 2\n");
  EXPECT_EQ(p.killed_rank, 1);
  EXPECT_EQ(p.killed_signal, 9);
}

TEST(MpirunStderr, AbortBannerAndInternalLogLeftOut) {
  const std::string in = kFrame +
                         "\nMPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith "
                         "errorcode 1.\n" +
                         kFrame +
                         "\n[rank 1] loom: error: no space left\n[vm:27431] ORTE_ERROR_LOG: Data "
                         "unpack would read past end of buffer in file show_help.c at line 501\n"
                         "[vm:22885] [[13723,0],0] ORTE_ERROR_LOG: Out of resource in file "
                         "../../../orte/util/show_help.c at line 501\n"
                         "[vm:29227] 2 more processes have sent help message help-mpi-api.txt / "
                         "mpi-abort\n[vm:29227] Set MCA parameter \"orte_base_help_aggregate\" to "
                         "0 to see all help / error messages\n";
  const Passed p = passed(in, 1);
  EXPECT_EQ(p.out, "[rank 1] loom: error: no space left\n");
  EXPECT_EQ(p.killed_rank, -1);
}

// A banner loom does not know (mpirun could not start the program) goes through whole, as
// does a line without its newline at the end.
TEST(MpirunStderr, UnknownBannerAndLastPartialLinePassed) {
  const std::string banner = kFrame +
                             "\nmpirun was unable to launch the specified application as it "
                             "could not access\nor execute an executable:\n" +
                             kFrame + "\n";
  EXPECT_EQ(passed(banner + "tail").out, banner + "tail\n");
  const std::string open = kFrame + "\nsomething cut short\n";
  EXPECT_EQ(passed(open).out, open);
}

}  // namespace
}  // namespace loom::launch
