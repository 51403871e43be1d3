#pragma once
// The MPI backend: Open MPI's non-blocking calls, posted and progressed by one engine thread
// (mpi_engine.h). CPU tensors go straight to MPI; CUDA tensors are staged through host memory
// (copied out before the call, back when the waiting thread sees it complete).
// Only comm/ includes this header: nothing else sees mpi.h.
#include <mpi.h>

#include <vector>

#include "loom/comm/backend.h"

namespace loom::comm {

// The MPI_COMM_WORLD rank of each rank of `comm`, in its rank order.
std::vector<int> world_ranks_of(MPI_Comm comm);

class MpiBackend : public Backend {
 public:
  // Takes ownership of `comm` when `owned` (freed in the destructor).
  MpiBackend(MPI_Comm comm, std::string name, bool owned);
  ~MpiBackend() override;

  BackendKind kind() const override { return BackendKind::Mpi; }
  int64_t max_tag() const override { return max_tag_; }

  // The world ranks with which a point-to-point transfer needs no progress from this process
  // while nobody waits (Engine::Op::quiet): those on this machine when Open MPI copies from
  // them in one step (single_copy.h). Set before the first backend is made.
  static void set_quiet_world_ranks(std::vector<bool> quiet);
  // Whether transfers with this rank of the communicator are quiet.
  bool quiet_peer(int rank) const;

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
  std::vector<bool> quiet_peer_;  // by rank of comm_
  int64_t max_tag_ = 32767;       // the least MPI guarantees
};

}  // namespace loom::comm
