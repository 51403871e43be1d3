#pragma once
// The built-in launcher: starts N ranks of a command on this machine with the torchrun
// environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
// a rendezvous store hosted here, as torchrun's agent does, and watches them: a rank that
// fails brings the others down, with one line naming it.
#include <string>
#include <vector>

#include "loom/comm/types.h"

namespace loom::launch {

struct Options {
  int nproc = 1;
  std::vector<std::string> command;  // argv; command[0] is found on PATH unless it has a '/'
  comm::BackendKind comm = comm::BackendKind::Gloo;  // passed to the ranks as LOOM_COMM
  int grace_s = 10;  // after a failure: seconds between SIGTERM and SIGKILL to the others
};

// Runs the ranks to the end. Returns 0 when all exited with 0; otherwise the exit code of the
// first rank that failed (128 + signal when it was killed), after stopping the others.
// SIGINT/SIGTERM to this process are passed on to every rank.
int run_local(const Options& o);

}  // namespace loom::launch
