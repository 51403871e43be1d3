#pragma once
// The store the launchers of a multi-node job share (`loom launch --nnodes H`): node 0's
// launcher hosts it on MASTER_ADDR:MASTER_PORT, where every rank meets, and the launchers keep
// their heartbeats and the job's first failure in it (launch/node_watch.h). A c10d TCP store,
// so that a rank's rendezvous and its launcher's watch are one port.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::comm {

class NodeStore {
 public:
  // server: hosted here on `port` (every address of this host); otherwise a client of
  // host:port, which waits up to `timeout` for the server to come up. Throws loom::Error
  // naming host:port when it cannot.
  NodeStore(const std::string& host, int port, bool server, std::chrono::milliseconds timeout);
  ~NodeStore();
  int port() const;
  int64_t add(const std::string& key, int64_t by);  // by 0: reads a counter
  void set(const std::string& key, const std::string& value);
  bool has(const std::string& key);
  std::string get(const std::string& key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// This host's name for messages and placement: LOOM_HOST if set, else gethostname().
std::string host_name();

}  // namespace loom::comm
