#pragma once
// The launchers of a multi-node job (`loom launch --nnodes H`) watch one another through the
// store node 0 hosts: each beats a counter every quarter second, every node's first failure
// is posted for all (the first of them stops the others), and a node that stops beating (host
// lost, link cut) or a store out of reach is named. The store is used from a thread of its own, so
// that a call stuck on a dead link never holds up the launcher's watch of its ranks.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "loom/comm/node_store.h"

namespace loom::launch {

struct NodeInfo {
  int nnodes = 1, node_rank = 0, nproc = 1;
  std::string host;                           // this node's name (comm::host_name)
  std::string master;                         // "ADDR:PORT" of the store, for messages
  std::chrono::milliseconds liveness{30000};  // a node silent this long is gone
  std::chrono::milliseconds join{300000};     // ... or never seen this long after the start
  std::string prefix = "loom/nodes/";         // of the keys (one per attempt of the job)
};

// "ranks 2-3": those of node `node` when every node runs `nproc`.
std::string ranks_of(int nproc, int node);

class NodeWatch {
 public:
  NodeWatch(std::shared_ptr<comm::NodeStore> store, NodeInfo info);
  ~NodeWatch();
  // The reason this node's ranks must stop, once: another node's failure, a silent node, or
  // the store out of reach. Empty while all is well.
  std::string trouble();
  // A failure here (one line, "rank 2 on h1 exited with code 1"), posted for the other nodes.
  void post_failure(const std::string& what);
  // The failures other nodes posted ("; "-joined, "" for none), after waiting `wait` for them:
  // a rank here that fails on a broken connection is named beside the one that broke it.
  std::string other_failures(std::chrono::milliseconds wait);
  // After this node's ranks exited: tells the others (`final`: bad input or a stop, which no
  // restart cures); node 0 (which hosts the store) then waits until every node is done or
  // gone, and names the nodes gone.
  void finish(int code, bool final = false);
  // Another node finished with `final` (read by finish()).
  bool final_elsewhere();

 private:
  struct State;
  std::shared_ptr<State> s_;
  std::thread thread_;
};

}  // namespace loom::launch
