#pragma once
// A communicator over a group of ranks, shaped like c10d's Backend: every call is
// non-blocking, takes tensors (contiguous; any device the backend supports), returns a Work
// handle, takes Options (timeout) and counts the bytes it sends. Three implementations:
// mpi_backend.h (Open MPI), c10d_backend.h (c10d's Gloo and NCCL process groups).
//
// Ordering rule: all ranks of a communicator issue its collectives in the same order, and a
// tensor stays alive and untouched until its Work completed (wait() on every Work).
// The pointer overloads wrap host memory in a CPU tensor; they are for small host buffers.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "loom/comm/types.h"
#include "loom/comm/work.h"

namespace at {
class Tensor;
}

namespace loom::comm {

class Backend {
 public:
  Backend(std::string name, int rank, int size);
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual BackendKind kind() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // The rank in the world of this communicator's rank r (messages name world ranks: the
  // ones a user sees in logs and in LOOM_FAULT_RANK).
  int world_rank(int r) const { return world_ranks_.empty() ? r : world_ranks_.at(r); }
  // The largest point-to-point tag this backend carries.
  virtual int64_t max_tag() const = 0;

  // In place.
  WorkPtr all_reduce(const at::Tensor& t, ReduceOp op = ReduceOp::Sum, const Options& o = {});
  // `in` holds size() blocks of out.numel(); this rank gets block rank() reduced into `out`.
  WorkPtr reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op = ReduceOp::Sum,
                         const Options& o = {});
  // `out` gets size() blocks of in.numel(), block i from rank i.
  WorkPtr all_gather(const at::Tensor& in, const at::Tensor& out, const Options& o = {});
  // `in` holds size() blocks, block j for rank j; `out` gets block i from rank i.
  WorkPtr all_to_all(const at::Tensor& in, const at::Tensor& out, const Options& o = {});
  WorkPtr broadcast(const at::Tensor& t, int root, const Options& o = {});
  WorkPtr barrier(const Options& o = {});
  WorkPtr send(const at::Tensor& t, int dst, int tag, const Options& o = {});
  WorkPtr recv(const at::Tensor& t, int src, int tag, const Options& o = {});

  // Host-memory forms: `count` elements of type `t` at `buf` (per rank for the gathers).
  WorkPtr all_reduce(void* buf, size_t count, DType t, ReduceOp op = ReduceOp::Sum,
                     const Options& o = {});
  WorkPtr reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                         ReduceOp op = ReduceOp::Sum, const Options& o = {});
  WorkPtr all_gather(const void* send, void* recv, size_t send_count, DType t,
                     const Options& o = {});
  WorkPtr all_to_all(const void* send, void* recv, size_t count, DType t, const Options& o = {});
  WorkPtr broadcast(void* buf, size_t count, DType t, int root, const Options& o = {});
  WorkPtr send(const void* buf, size_t count, DType t, int dst, int tag, const Options& o = {});
  WorkPtr recv(void* buf, size_t count, DType t, int src, int tag, const Options& o = {});

  // Byte strings of any length: `send[j]` goes to rank j, and `recv[i]` is resized to what rank
  // i sent (this rank's own string is copied). The lengths travel first (a blocking all-to-all
  // of one int64 per rank), then the strings as point-to-point messages tagged `tag`
  // (concurrent exchanges on one communicator take different tags). Counted as one all-to-all
  // of the bytes sent; `send` and `recv` stay untouched until the Work completed.
  WorkPtr all_to_all_v(const std::vector<std::span<const uint8_t>>& send,
                       std::vector<std::vector<uint8_t>>& recv, int tag, const Options& o = {});

  // Sub-communicator of the ranks with the same color, ordered by key (collective call on
  // this communicator: every rank calls it, in the same order as its other collectives).
  std::unique_ptr<Backend> split(int color, int key, const std::string& name);

  // A communicator of the same ranks for large host-memory messages (checkpoint files between
  // hosts): this one, unless it moves a GPU's memory (NCCL, which would stage every byte
  // through the GPU and needs the two directions of a pair posted together): then a Gloo
  // group beside it, made by the first call and kept. The first call is collective (every
  // rank makes it at the same point of its collectives).
  Backend& host_world();

  Stats stats() const;
  void reset_stats();

  // One operation as a backend receives it: `what` names it for errors, `delay_s` is the
  // emulated link's delay its Work must honour (counting is done before the call).
  struct Call {
    OpKind kind;
    std::string what;
    double delay_s;
    const Options& options;
  };

 protected:
  // What a backend implements: post the operation and return its Work.
  virtual WorkPtr do_all_reduce(const at::Tensor& t, ReduceOp op, const Call& c) = 0;
  virtual WorkPtr do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op,
                                    const Call& c) = 0;
  virtual WorkPtr do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call& c) = 0;
  virtual WorkPtr do_all_to_all(const at::Tensor& in, const at::Tensor& out, const Call& c) = 0;
  virtual WorkPtr do_broadcast(const at::Tensor& t, int root, const Call& c) = 0;
  virtual WorkPtr do_barrier(const Call& c) = 0;
  virtual WorkPtr do_send(const at::Tensor& t, int dst, int tag, const Call& c) = 0;
  virtual WorkPtr do_recv(const at::Tensor& t, int src, int tag, const Call& c) = 0;
  // Members: the ranks of this communicator with this rank's color, in key order.
  virtual std::unique_ptr<Backend> do_split(const std::vector<int>& members, int color,
                                            const std::string& name) = 0;
  // host_world()'s communicator when it is not this one (made once); nullptr: this one.
  virtual std::unique_ptr<Backend> make_host_world() { return nullptr; }

 private:
  WorkPtr counted(OpKind kind, const std::string& detail, uint64_t bytes, const Options& o,
                  const std::function<WorkPtr(const Call&)>& post);
  std::string peer(int r) const;  // "1 (world rank 3)"

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;         // empty: this is the world
  std::unique_ptr<Backend> host_world_;  // null: this one, or not asked for yet
  mutable std::mutex stats_mu_;
  Stats stats_;
};

// v summed over the ranks of `c` (a blocking all-reduce of one double).
double sum_over(Backend& c, double v);

}  // namespace loom::comm
