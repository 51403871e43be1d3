#include "loom/profile/idle_group.h"

#include <torch/torch.h>

#include "loom/common/error.h"

namespace loom::profile {
namespace {

class Done : public comm::Work {
 public:
  explicit Done(const std::string& what) : Work(what, std::chrono::milliseconds(1)) {}

 protected:
  bool completed() override { return true; }
  bool block_until(std::chrono::steady_clock::time_point) override { return true; }
};

class IdleGroup : public comm::Backend {
 public:
  explicit IdleGroup(int size) : Backend("idle-tp", 0, size) {}
  comm::BackendKind kind() const override { return comm::BackendKind::Mpi; }
  int64_t max_tag() const override { return 0; }

 protected:
  comm::WorkPtr done(const Call& c) { return std::make_shared<Done>(c.what); }
  comm::WorkPtr do_all_reduce(const at::Tensor&, comm::ReduceOp, const Call& c) override {
    return done(c);
  }
  comm::WorkPtr do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, comm::ReduceOp,
                                  const Call& c) override {
    out.copy_(in.narrow(0, 0, out.numel()));
    return done(c);
  }
  comm::WorkPtr do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call& c) override {
    for (int r = 0; r < size(); ++r) out.narrow(0, r * in.numel(), in.numel()).copy_(in);
    return done(c);
  }
  comm::WorkPtr do_all_to_all(const at::Tensor& in, const at::Tensor& out, const Call& c) override {
    out.copy_(in);
    return done(c);
  }
  comm::WorkPtr do_broadcast(const at::Tensor&, int, const Call& c) override { return done(c); }
  comm::WorkPtr do_barrier(const Call& c) override { return done(c); }
  comm::WorkPtr do_send(const at::Tensor&, int, int, const Call& c) override { refuse(c); }
  comm::WorkPtr do_recv(const at::Tensor&, int, int, const Call& c) override { refuse(c); }
  std::unique_ptr<Backend> do_split(const std::vector<int>&, int, const std::string&) override {
    LOOM_CHECK(false, "the profile's idle tensor-parallel group cannot be split");
    return nullptr;
  }

 private:
  [[noreturn]] static void refuse(const Call& c) {
    throw Error(detail::concat("the profile's idle tensor-parallel group has no peers: ", c.what));
  }
};

}  // namespace

std::unique_ptr<comm::Backend> idle_group(int size) {
  return std::make_unique<IdleGroup>(size);
}

}  // namespace loom::profile
