#pragma once
// The built-in launcher: starts N ranks of a command on this machine with the torchrun
// environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
// a rendezvous store hosted here, as torchrun's agent does, and watches them: a rank that
// fails brings the others down, with one line naming it. With nnodes > 1 it is one of H such
// launchers, one per machine: node 0's hosts the store on master_addr:master_port, and a
// failure on any node, or a node gone silent, stops every node (node_watch.h).
#include <string>
#include <vector>

#include "loom/comm/types.h"

namespace loom::launch {

struct Options {
  int nproc = 1;  // ranks on this node
  int nnodes = 1;
  int node_rank = 0;        // this node's ranks are node_rank * nproc + 0 .. nproc - 1
  std::string master_addr;  // nnodes > 1: node 0's address, where the store is
  int master_port = 0;
  std::vector<std::string> command;  // argv; command[0] is found on PATH unless it has a '/'
  comm::BackendKind comm = comm::BackendKind::Gloo;  // passed to the ranks as LOOM_COMM
  int grace_s = 10;  // after a failure: seconds between SIGTERM and SIGKILL to the others
  // After SIGTERM/SIGINT to the launcher, or a rank that stopped on one (exit 130 or 143):
  // seconds the ranks get to finish the step and write a checkpoint before SIGKILL.
  int stop_grace_s = 300;
  int attempt = 0;  // restarts so far: LOOM_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT
};

struct Outcome {
  int code = 0;          // as run_local returns
  int failed_rank = -1;  // the first rank that failed, -1 for none
  std::string why;       // "killed by signal 9", "exited with code 1"
  bool stopped = false;  // the launcher or a rank got SIGTERM/SIGINT: no restart
};

// Runs the ranks to the end. Returns 0 when all exited with 0; otherwise the exit code of the
// first rank that failed (128 + signal when it was killed), after stopping the others.
// SIGINT/SIGTERM to this process are passed on to every rank once (each rank is in its own
// process group, so a terminal's Ctrl-C reaches the ranks only through here); a second one
// kills them at once.
int run_local(const Options& o);
Outcome run_once(const Options& o);

}  // namespace loom::launch
