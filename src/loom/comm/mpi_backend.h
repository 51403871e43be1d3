#pragma once
// The MPI backend: Open MPI's non-blocking calls, posted and progressed by one engine thread
// (mpi_engine.h). CPU tensors go straight to MPI; CUDA tensors are staged through host memory
// (copied out before the call, back when the waiting thread sees it complete).
// Only comm/ includes this header: nothing else sees mpi.h.
#include <mpi.h>

#include "loom/comm/backend.h"

namespace loom::comm {

class MpiBackend : public Backend {
 public:
  // Takes ownership of `comm` when `owned` (freed in the destructor).
  MpiBackend(MPI_Comm comm, std::string name, bool owned);
  ~MpiBackend() override;

  BackendKind kind() const override { return BackendKind::Mpi; }
  int64_t max_tag() const override { return max_tag_; }

 protected:
  WorkPtr do_all_reduce(const at::Tensor& t, ReduceOp op, const Call& c) override;
  WorkPtr do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op,
                            const Call& c) override;
  WorkPtr do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call& c) override;
  WorkPtr do_all_to_all(const at::Tensor& in, const at::Tensor& out, const Call& c) override;
  WorkPtr do_broadcast(const at::Tensor& t, int root, const Call& c) override;
  WorkPtr do_barrier(const Call& c) override;
  WorkPtr do_send(const at::Tensor& t, int dst, int tag, const Call& c) override;
  WorkPtr do_recv(const at::Tensor& t, int src, int tag, const Call& c) override;
  std::unique_ptr<Backend> do_split(const std::vector<int>& members, int color,
                                    const std::string& name) override;

 private:
  MPI_Comm comm_;
  bool owned_;
  int64_t max_tag_ = 32767;  // the least MPI guarantees
};

}  // namespace loom::comm
