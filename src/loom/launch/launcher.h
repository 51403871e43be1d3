#pragma once
// The built-in launcher: starts N ranks of a command on this machine with the torchrun
// environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
// a rendezvous store hosted here, as torchrun's agent does, and watches them: a rank that
// fails brings the others down, with one line naming it. With nnodes > 1 it is one of H such
// launchers, one per machine: node 0's hosts the store on master_addr:master_port, and a
// failure on any node, or a node gone silent, stops every node (node_watch.h).
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/types.h"

namespace loom::comm {
class NodeStore;
}

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
  // The job's start (seconds since the epoch, node 0's clock), given to the ranks as
  // LOOM_JOB_START: a restarted `loom train` goes on from the job's newest checkpoint.
  std::string job_start;
  // run_job: attempts after a failure (all nodes restart together), and how long node 0
  // waits for every node to be ready for the next one (a lost host coming back).
  int max_restarts = 0;
  int join_timeout_s = 600;
};

struct Outcome {
  int code = 0;                  // as run_local returns
  int failed_rank = -1;          // the first rank that failed, -1 for none
  std::string why;               // "killed by signal 9", "exited with code 1"
  bool stopped = false;          // the launcher or a rank got SIGTERM/SIGINT: no restart
  bool final_elsewhere = false;  // another node's attempt ended so (bad input, a stop)
};

// Runs the ranks to the end, once. Code 0 when all exited with 0; otherwise the exit code of
// the first rank that failed (128 + signal when it was killed), after stopping the others.
// SIGINT/SIGTERM to this process are passed on to every rank once (each rank is in its own
// process group, so a terminal's Ctrl-C reaches the ranks only through here); a second one
// kills them at once. Across nodes: `store` is node 0's (made here when null) and the
// launchers' watch keys live under `prefix` (one per attempt when restarting: job.h).
Outcome run_once(const Options& o, std::shared_ptr<comm::NodeStore> store = nullptr,
                 const std::string& prefix = "loom/nodes/");

}  // namespace loom::launch
