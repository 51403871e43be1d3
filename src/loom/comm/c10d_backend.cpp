#include "loom/comm/c10d_backend.h"

#include <c10/util/Logging.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "loom/comm/c10d_groups.h"
#include "loom/comm/host_staging.h"
#include "loom/common/error.h"

namespace loom::comm {
namespace {

using Clock = std::chrono::steady_clock;

c10d::ReduceOp c10d_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

// acc = op(acc, x), in place.
void combine(at::Tensor acc, const at::Tensor& x, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: acc.add_(x); return;
    case ReduceOp::Max: at::maximum_out(acc, acc, x); return;
    case ReduceOp::Min: at::minimum_out(acc, acc, x); return;
  }
}

// One or more c10d Works (a block exchange posts many); keeps their tensors alive until it is
// destroyed.
class C10dWork : public Work {
 public:
  C10dWork(const Backend::Call& c, std::vector<c10::intrusive_ptr<c10d::Work>> w,
           std::vector<at::Tensor> tensors)
      : Work(c.what, c.options.timeout, c.delay_s), w_(std::move(w)), keep_(std::move(tensors)) {}

 protected:
  bool completed() override {
    for (const auto& w : w_) {
      if (!w->isCompleted()) return false;
      if (!w->isSuccess()) std::rethrow_exception(w->exception());
    }
    return true;
  }
  bool block_until(Clock::time_point deadline) override {
    for (const auto& w : w_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      try {
        // Gloo blocks the host; NCCL makes the current CUDA stream wait (events), not the host.
        if (!w->wait(std::max(left, std::chrono::milliseconds(1)))) return false;
      } catch (const std::exception& e) {
        // c10d and Gloo report their own timeouts ("Timed out waiting 199ms for recv ...").
        const std::string m = e.what();
        if (Clock::now() >= deadline || m.find("imed out") != std::string::npos) return false;
        throw;
      }
    }
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> w_;
  std::vector<at::Tensor> keep_;
};

class C10dBackend : public Backend {
 public:
  C10dBackend(BackendKind kind, std::string name, int rank, int size,
              c10::intrusive_ptr<c10d::Store> store, std::string host,
              std::chrono::milliseconds timeout)
      : Backend(std::move(name), rank, size),
        kind_(kind),
        store_(std::move(store)),
        host_(std::move(host)),
        timeout_(timeout) {
    pg_ = kind == BackendKind::Nccl ? make_nccl_group(store_, rank, size, timeout)
                                    : make_gloo_group(store_, rank, size, timeout, host_);
    if (kind == BackendKind::Nccl) wire_ = nccl_device();
    // A member returns from creating the group once its own side of each connection is up;
    // if it then destroyed the group at once, a peer still finishing the handshake would read
    // "connection closed by peer" (seen with short-lived groups on loaded cores). The barrier
    // returns only when every member has created the group.
    settle();
    reset_stats();  // counters start with the first operation of the caller
  }
  ~C10dBackend() override {
    // Likewise before closing the connections: a peer may still be reading its last message.
    // Not while an exception unwinds (a peer may be gone; the launcher stops everybody).
    if (std::uncaught_exceptions() == 0) {
      try {
        settle();
      } catch (const std::exception&) {
      }
    }
  }

  BackendKind kind() const override { return kind_; }
  int64_t max_tag() const override { return kMaxUserTag; }

 private:
  void settle() {
    if (size() > 1) barrier()->wait();
  }

 protected:
  WorkPtr wrap(const Call& c, std::vector<c10::intrusive_ptr<c10d::Work>> w,
               std::vector<at::Tensor> keep) {
    return std::make_shared<C10dWork>(c, std::move(w), std::move(keep));
  }
  WorkPtr wrap(const Call& c, c10::intrusive_ptr<c10d::Work> w, std::vector<at::Tensor> keep) {
    return wrap(c, std::vector<c10::intrusive_ptr<c10d::Work>>{std::move(w)}, std::move(keep));
  }
  // Gloo moves host memory, NCCL the rank's GPU: a tensor elsewhere goes through a copy there
  // (host_staging.h), flat.
  Staged flat(const at::Tensor& t, bool input, bool output) const {
    return stage(t.view({-1}), input, output, wire_);
  }
  WorkPtr wrap(const Call& c, c10::intrusive_ptr<c10d::Work> w, const std::vector<Staged>& s) {
    std::vector<at::Tensor> keep;
    for (const auto& x : s) keep.push_back(x.wire);
    WorkPtr work = wrap(c, std::move(w), keep);
    copy_back_on_completion(*work, s);
    return work;
  }

  WorkPtr do_all_reduce(const at::Tensor& t, ReduceOp op, const Call& c) override {
    Staged s = flat(t, true, true);
    std::vector<at::Tensor> v = {s.wire};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d_op(op);
    o.timeout = c.options.timeout;
    return wrap(c, pg_->allreduce(v, o), {s});
  }
  // The blocks of the Backend contract are blocks of the flattened tensors; c10d's base
  // collectives split dim 0, so they get flat views (the results land in `out` all the same).
  WorkPtr do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op,
                            const Call& c) override {
    Staged i = flat(in, true, false), o = flat(out, false, true);
    if (kind_ == BackendKind::Gloo) return gloo_reduce_scatter(i, o, op, c);
    c10d::ReduceScatterOptions opt;
    opt.reduceOp = c10d_op(op);
    opt.timeout = c.options.timeout;
    return wrap(c, pg_->_reduce_scatter_base(o.wire, i.wire, opt), {i, o});
  }
  // Over Gloo the block collectives are chunked point-to-point exchanges (BlockExchange in
  // c10d_groups.h says why). The blocks of the flat tensors, block q of `t` being t's q-th of p.
  std::vector<at::Tensor> blocks(const at::Tensor& t) const { return t.chunk(size()); }
  WorkPtr exchange(const Call& c, const std::vector<at::Tensor>& to,
                   const std::vector<at::Tensor>& from, std::vector<at::Tensor> keep) {
    return wrap(c, exchange_.post(*pg_, to, from), std::move(keep));
  }
  WorkPtr exchange_then_copy_back(const Call& c, const std::vector<at::Tensor>& to,
                                  const std::vector<at::Tensor>& from,
                                  const std::vector<Staged>& staged) {
    std::vector<at::Tensor> keep;
    for (const auto& x : staged) keep.push_back(x.wire);
    WorkPtr w = exchange(c, to, from, keep);
    copy_back_on_completion(*w, staged);
    return w;
  }
  // Each rank reduces the p blocks it received, in rank order on every rank (deterministic).
  WorkPtr gloo_reduce_scatter(const Staged& i, const Staged& o, ReduceOp op, const Call& c) {
    const std::vector<at::Tensor> mine = blocks(i.wire);
    std::vector<at::Tensor> got = blocks(at::empty_like(i.wire));
    got[rank()] = mine[rank()];
    WorkPtr w = exchange(c, mine, got, {i.wire, o.wire});
    w->then([got, o, op] {
      o.wire.copy_(got[0]);
      for (size_t k = 1; k < got.size(); ++k) combine(o.wire, got[k], op);
      if (o.origin.defined()) o.origin.copy_(o.wire);
    });
    return w;
  }
  WorkPtr do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call& c) override {
    Staged i = flat(in, true, false), o = flat(out, false, true);
    if (kind_ == BackendKind::Gloo) {
      std::vector<at::Tensor> got = blocks(o.wire);
      got[rank()].copy_(i.wire);
      return exchange_then_copy_back(c, std::vector<at::Tensor>(size(), i.wire), got, {i, o});
    }
    c10d::AllgatherOptions opt;
    opt.timeout = c.options.timeout;
    return wrap(c, pg_->_allgather_base(o.wire, i.wire, opt), {i, o});
  }
  WorkPtr do_all_to_all(const at::Tensor& in, const at::Tensor& out, const Call& c) override {
    Staged i = flat(in, true, false), o = flat(out, false, true);
    if (kind_ == BackendKind::Gloo) {
      const std::vector<at::Tensor> mine = blocks(i.wire);
      std::vector<at::Tensor> got = blocks(o.wire);
      got[rank()].copy_(mine[rank()]);
      return exchange_then_copy_back(c, mine, got, {i, o});
    }
    std::vector<int64_t> equal_splits;
    c10d::AllToAllOptions opt;
    opt.timeout = c.options.timeout;
    return wrap(c, pg_->alltoall_base(o.wire, i.wire, equal_splits, equal_splits, opt), {i, o});
  }
  WorkPtr do_broadcast(const at::Tensor& t, int root, const Call& c) override {
    Staged s = flat(t, rank() == root, rank() != root);
    std::vector<at::Tensor> v = {s.wire};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = c.options.timeout;
    return wrap(c, pg_->broadcast(v, o), {s});
  }
  WorkPtr do_barrier(const Call& c) override {
    c10d::BarrierOptions o;
    o.timeout = c.options.timeout;
    return wrap(c, pg_->barrier(o), std::vector<at::Tensor>{});
  }
  // NCCL matches point-to-point messages by order, not by tag: a pair of ranks must post its
  // sends and receives in the same order (loom's schedules do; the tag is checked by Gloo).
  WorkPtr do_send(const at::Tensor& t, int dst, int tag, const Call& c) override {
    Staged s = flat(t, true, false);
    std::vector<at::Tensor> v = {s.wire};
    return wrap(c, pg_->send(v, dst, tag), {s});
  }
  WorkPtr do_recv(const at::Tensor& t, int src, int tag, const Call& c) override {
    Staged s = flat(t, false, true);
    std::vector<at::Tensor> v = {s.wire};
    return wrap(c, pg_->recv(v, src, tag), {s});
  }
  std::unique_ptr<Backend> do_split(const std::vector<int>& members, int color,
                                    const std::string& name) override {
    // Every rank of this communicator splits in the same order, so the counter names the same
    // key space on each; the color separates the new groups inside it.
    const std::string prefix = "split" + std::to_string(splits_++) + "/" + std::to_string(color);
    int me = -1;
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i] == rank()) me = static_cast<int>(i);
    LOOM_CHECK_GE(me, 0, "split: this rank is not among its color's members");
    return group(kind_, prefix, name, me, static_cast<int>(members.size()));
  }
  // NCCL: host memory goes over Gloo between the hosts' CPUs, not staged through the GPU.
  std::unique_ptr<Backend> make_host_world() override {
    if (kind_ != BackendKind::Nccl) return nullptr;
    return group(BackendKind::Gloo, "host", name() + " (host memory)", rank(), size());
  }
  // A new group of `kind` over this one's store, its keys under `prefix`.
  std::unique_ptr<Backend> group(BackendKind kind, const std::string& prefix,
                                 const std::string& name, int rank, int size) {
    auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
    return std::make_unique<C10dBackend>(kind, name, rank, size, store, host_, timeout_);
  }

 private:
  BackendKind kind_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string host_;
  std::chrono::milliseconds timeout_;
  at::Device wire_ = at::kCPU;  // where the transport reads and writes
  c10::intrusive_ptr<c10d::Backend> pg_;
  BlockExchange exchange_;
  int splits_ = 0;
};

int env_int(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    LOOM_USAGE(name, " is not set; launch with `loom train --nproc N`, torchrun or mpirun");
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > hi)
    LOOM_USAGE(name, "=", v, " is not a whole number in [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

}  // namespace

Rendezvous rendezvous_from_env() {
  Rendezvous r;
  if (!std::getenv("WORLD_SIZE") && !std::getenv("RANK")) {  // a lone process: a world of one
    r.host_store = true;
    return r;
  }
  r.size = env_int("WORLD_SIZE", 1, 1 << 20);
  r.rank = env_int("RANK", 0, r.size - 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) r.host = a;
  if (r.size > 1 || std::getenv("MASTER_PORT")) r.port = env_int("MASTER_PORT", 1, 65535);
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = agent && std::string(agent) == "True";
  r.host_store = r.rank == 0 && !agent_store;
  // torchrun's workers use their agent's store under this prefix (one per restart).
  if (agent_store) {
    const char* n = std::getenv("TORCHELASTIC_RESTART_COUNT");
    r.prefix = std::string("/worker/attempt_") + (n && *n ? n : "0");
  }
  return r;
}

bool c10d_available(BackendKind kind, std::string* why) {
  std::string reason;
  if (kind == BackendKind::Nccl) reason = nccl_unavailable_reason();
  if (kind == BackendKind::Mpi) reason = "not a c10d backend";
  if (why) *why = reason;
  return reason.empty();
}

std::unique_ptr<Backend> make_c10d_world(BackendKind kind, const Rendezvous& r) {
  LOOM_CHECK(kind != BackendKind::Mpi, "make_c10d_world takes gloo or nccl");
  // c10d's own warnings (a socket poll that timed out, an address family that does not
  // resolve) come before loom's one line about the same failure; TORCH_CPP_LOG_LEVEL, when
  // set, still decides.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL"))
    FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(r.port);
  o.isServer = r.host_store;
  o.numWorkers = r.host_store ? std::optional<size_t>(r.size) : std::nullopt;
  o.waitWorkers = false;
  o.timeout = r.timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(r.host, o);
  } catch (const std::exception& e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    throw Error(detail::concat("[rank ", r.rank, "] cannot reach the rendezvous store at ", r.host,
                               ":", r.port, " (MASTER_ADDR:MASTER_PORT): ", m));
  }
  if (!r.prefix.empty()) store = c10::make_intrusive<c10d::PrefixStore>(r.prefix, store);
  store = c10::make_intrusive<c10d::PrefixStore>("loom", store);
  // Each rank says it came, so that a world that does not fill up names who is missing
  // (the group's own timeout names only a key of its handshake).
  auto joined = [](int rank) { return "joined/" + std::to_string(rank); };
  store->set(joined(r.rank), std::vector<uint8_t>{1});
  try {
    return std::make_unique<C10dBackend>(kind, "world", r.rank, r.size, store, r.host, r.timeout);
  } catch (const std::exception& e) {
    std::vector<int> missing;
    try {
      for (int q = 0; q < r.size && missing.size() <= 8; ++q)
        if (!store->check({joined(q)})) missing.push_back(q);
    } catch (const std::exception&) {  // the store's host (rank 0, or a launcher) is gone
      throw Error(detail::concat("[rank ", r.rank, "] lost the rendezvous store at ", r.host, ":",
                                 r.port, " while the ", r.size,
                                 " ranks met; its host stopped (see its own message)"));
    }
    if (missing.empty()) throw;
    std::string who;
    for (size_t i = 0; i < missing.size() && i < 8; ++i)
      who += (i ? "," : "") + std::to_string(missing[i]);
    if (missing.size() > 8) who += ",...";
    throw Error(detail::concat(
        "[rank ", r.rank, "] rank", missing.size() > 1 ? "s " : " ", who, " of WORLD_SIZE=", r.size,
        " did not join within ", r.timeout.count() / 1000.0, " s at ", r.host, ":", r.port,
        " (MASTER_ADDR:MASTER_PORT); start every rank, with the same MASTER_ADDR and MASTER_PORT"));
  }
}

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(std::chrono::milliseconds timeout) : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions o;
  o.port = 0;  // any free port
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = timeout;
  impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
}

StoreServer::~StoreServer() = default;

int StoreServer::port() const {
  return impl_->store->getPort();
}

}  // namespace loom::comm
