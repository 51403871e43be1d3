// c10d's ProcessGroupGloo. The wheel ships no gloo headers; Debian's libgloo-dev supplies them.
// loom only passes gloo objects by pointer (devices, the store), so their layout never matters
// here and nothing from libgloo is linked: the code is libtorch's.
#define USE_C10D_GLOO 1
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "loom/comm/c10d_groups.h"

namespace loom::comm {
namespace {

// This host's address on the route to `host` (the store's, MASTER_ADDR), "" if there is none:
// the address the other ranks reach this one at, whatever the hostname resolves to. (Gloo's
// default device takes the hostname's address, which in a network namespace, or on a machine
// whose hostname maps to 127.0.1.1, is not one the other hosts can reach.) A UDP connect
// sends nothing: it only picks the route.
std::string address_towards(const std::string& host) {
  addrinfo hints = {}, *res = nullptr;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "";
  std::string out;
  const int fd = ::socket(res->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local = {};
  socklen_t len = sizeof local;
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* a =
        local.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
            : &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr;
    if (::inet_ntop(local.ss_family, a, buf, sizeof buf)) out = buf;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return out;
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (host == "127.0.0.1" || host == "localhost" || host == "::1")
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else if (const std::string a = address_towards(host); !a.empty())
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(a));
  else
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

}  // namespace loom::comm
