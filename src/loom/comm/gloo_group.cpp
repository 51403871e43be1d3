// c10d's ProcessGroupGloo. The wheel ships no gloo headers; Debian's libgloo-dev supplies them.
// loom only passes gloo objects by pointer (devices, the store), so their layout never matters
// here and nothing from libgloo is linked: the code is libtorch's.
#define USE_C10D_GLOO 1
#include <cstdlib>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "loom/comm/c10d_groups.h"

namespace loom::comm {

c10::intrusive_ptr<c10d::Backend> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (host == "127.0.0.1" || host == "localhost" || host == "::1")
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

}  // namespace loom::comm
