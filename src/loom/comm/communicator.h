#pragma once
// A communicator over an MPI group, shaped like c10d's ProcessGroup: every call is
// non-blocking, returns a Work handle, takes Options (timeout) and counts the bytes it sends.
// Ordering rule: all ranks of a communicator must issue its collectives in the same order;
// the progress engine posts them in the order they were issued (engine.h).
// Buffers must stay alive and untouched until the Work completes.
#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "loom/comm/types.h"
#include "loom/comm/work.h"

namespace loom::comm {

class Communicator {
 public:
  Communicator(MPI_Comm comm, std::string name, bool owned);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  MPI_Comm handle() const { return comm_; }

  // In place: buf holds count elements.
  WorkPtr all_reduce(void* buf, size_t count, DType t, ReduceOp op = ReduceOp::Sum,
                     const Options& o = {});
  // send holds size() * recv_count elements; this rank gets block rank() reduced into recv.
  WorkPtr reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                         ReduceOp op = ReduceOp::Sum, const Options& o = {});
  // recv gets size() * send_count elements, block i from rank i.
  WorkPtr all_gather(const void* send, void* recv, size_t send_count, DType t,
                     const Options& o = {});
  // send holds size() blocks of count elements, block j for rank j; recv gets size() blocks,
  // block i from rank i (MPI_Alltoall).
  WorkPtr all_to_all(const void* send, void* recv, size_t count, DType t, const Options& o = {});
  WorkPtr broadcast(void* buf, size_t count, DType t, int root, const Options& o = {});
  WorkPtr barrier(const Options& o = {});
  WorkPtr send(const void* buf, size_t count, DType t, int dst, int tag, const Options& o = {});
  WorkPtr recv(void* buf, size_t count, DType t, int src, int tag, const Options& o = {});

  // Sub-communicator of the ranks with the same color, ordered by key (collective call).
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) const;

  Stats stats() const;
  void reset_stats();

 private:
  WorkPtr submit(OpKind kind, std::string detail, uint64_t bytes, const Options& o,
                 std::function<MPI_Request()> post);

  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  mutable std::mutex stats_mu_;
  Stats stats_;
};

}  // namespace loom::comm
