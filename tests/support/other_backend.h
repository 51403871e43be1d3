#pragma once
// A Gloo communicator over the same ranks as `base` (collective on base): rank 0 hosts a store
// and tells the others its port through `base`. Lets one test binary train under MPI and
// under Gloo side by side (checkpoints written under one backend, resumed under the other).
#include <memory>

#include "loom/comm/c10d_backend.h"

namespace loom::test {

inline std::unique_ptr<comm::Backend> gloo_over(comm::Backend& base) {
  static std::unique_ptr<comm::StoreServer> server;
  int64_t port = 0;
  if (base.rank() == 0) {
    server = std::make_unique<comm::StoreServer>();
    port = server->port();
  }
  base.broadcast(&port, 1, comm::DType::Int64, 0)->wait();
  comm::Rendezvous r;
  r.port = static_cast<int>(port);
  r.rank = base.rank();
  r.size = base.size();
  r.prefix = base.name();
  return comm::make_c10d_world(comm::BackendKind::Gloo, r);
}

}  // namespace loom::test
