#include "loom/comm/node_store.h"

#include <unistd.h>

#include <cstdlib>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "loom/common/error.h"

namespace loom::comm {

struct NodeStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

NodeStore::NodeStore(const std::string& host, int port, bool server,
                     std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = server;
  o.waitWorkers = false;
  o.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(server ? "127.0.0.1" : host, o);
  } catch (const std::exception& e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    while (!m.empty() && (m.back() == '.' || m.back() == ' ')) m.pop_back();
    if (server)
      throw Error(detail::concat("cannot host the store on port ", port, ": ", m,
                                 "; pick a free one with --master-port"));
    throw Error(detail::concat("cannot reach node 0's store at ", host, ":", port, ": ", m,
                               "; start node 0's launcher there, or check --master-addr, "
                               "--master-port and the network"));
  }
}

NodeStore::~NodeStore() = default;

int NodeStore::port() const {
  return impl_->store->getPort();
}

int64_t NodeStore::add(const std::string& key, int64_t by) {
  return impl_->store->add(key, by);
}

void NodeStore::set(const std::string& key, const std::string& value) {
  impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

bool NodeStore::has(const std::string& key) {
  return impl_->store->check({key});
}

std::string NodeStore::get(const std::string& key) {
  const auto v = impl_->store->get(key);
  return {v.begin(), v.end()};
}

std::string host_name() {
  if (const char* h = std::getenv("LOOM_HOST"); h && *h) return h;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

}  // namespace loom::comm
