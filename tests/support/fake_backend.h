#pragma once
// A communicator for tests without MPI: every call fails ("unexpected communication: ...")
// unless a derived class overrides it, and DoneWork is an operation already complete.
#include <ATen/Tensor.h>

#include <chrono>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/comm/work.h"
#include "loom/common/error.h"

namespace loom::test {

class DoneWork : public comm::Work {
 public:
  DoneWork() : Work("in-process", std::chrono::milliseconds(60000)) {}

 protected:
  bool completed() override { return true; }
  bool block_until(std::chrono::steady_clock::time_point) override { return true; }
};

class FakeBackend : public comm::Backend {
 public:
  FakeBackend(const std::string& name, int rank, int size) : Backend(name, rank, size) {}
  comm::BackendKind kind() const override { return comm::BackendKind::Mpi; }
  int64_t max_tag() const override { return INT32_MAX; }

 protected:
  static comm::WorkPtr done() { return std::make_shared<DoneWork>(); }
  [[noreturn]] static comm::WorkPtr fail(const Call& c) {
    throw loom::Error("unexpected communication: " + c.what);
  }
  comm::WorkPtr do_all_reduce(const at::Tensor&, comm::ReduceOp, const Call& c) override {
    fail(c);
  }
  comm::WorkPtr do_reduce_scatter(const at::Tensor&, const at::Tensor&, comm::ReduceOp,
                                  const Call& c) override {
    fail(c);
  }
  comm::WorkPtr do_all_gather(const at::Tensor&, const at::Tensor&, const Call& c) override {
    fail(c);
  }
  comm::WorkPtr do_all_to_all(const at::Tensor&, const at::Tensor&, const Call& c) override {
    fail(c);
  }
  comm::WorkPtr do_broadcast(const at::Tensor&, int, const Call& c) override { fail(c); }
  comm::WorkPtr do_barrier(const Call& c) override { fail(c); }
  comm::WorkPtr do_send(const at::Tensor&, int, int, const Call& c) override { fail(c); }
  comm::WorkPtr do_recv(const at::Tensor&, int, int, const Call& c) override { fail(c); }
  std::unique_ptr<Backend> do_split(const std::vector<int>&, int, const std::string&) override {
    throw loom::Error("unexpected split");
  }
};

}  // namespace loom::test
