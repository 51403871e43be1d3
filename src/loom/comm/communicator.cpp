#include "loom/comm/communicator.h"

#include <sstream>

#include "loom/comm/engine.h"
#include "loom/common/error.h"

namespace loom::comm {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

const char* type_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

int checked_int(size_t count) {
  LOOM_CHECK_LE(count, static_cast<size_t>(INT32_MAX), "message too large for one MPI call");
  return static_cast<int>(count);
}

}  // namespace

Communicator::Communicator(MPI_Comm comm, std::string name, bool owned)
    : comm_(comm), name_(std::move(name)), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

WorkPtr Communicator::submit(OpKind kind, std::string detail, uint64_t bytes, const Options& o,
                             std::function<MPI_Request()> post) {
  std::ostringstream what;
  what << op_name(kind) << "(" << detail << ") on communicator '" << name_ << "' (rank "
       << rank_ << " of " << size_ << ")";
  auto work = std::make_shared<Work>(what.str(), o.timeout);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.calls[static_cast<int>(kind)] += 1;
    stats_.bytes[static_cast<int>(kind)] += bytes;
  }
  Engine::Op op;
  op.work = work;
  op.post = std::move(post);
  op.bytes = bytes;
  op.on_done = [this](double busy) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.busy_s += busy;
  };
  Engine::instance().submit(std::move(op));
  return work;
}

WorkPtr Communicator::all_reduce(void* buf, size_t count, DType t, ReduceOp op,
                                 const Options& o) {
  int n = checked_int(count);
  uint64_t bytes = 2 * (size_ - 1) * count * dtype_size(t) / size_;
  return submit(OpKind::AllReduce, std::to_string(count) + " " + type_name(t), bytes, o,
                [=, this] {
                  MPI_Request r;
                  MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type(t), mpi_op(op), comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                                     ReduceOp op, const Options& o) {
  int n = checked_int(recv_count);
  checked_int(recv_count * size_);
  uint64_t bytes = (size_ - 1) * recv_count * dtype_size(t);
  return submit(OpKind::ReduceScatter, std::to_string(recv_count) + " " + type_name(t) + " per rank",
                bytes, o, [=, this] {
                  MPI_Request r;
                  MPI_Ireduce_scatter_block(send, recv, n, mpi_type(t), mpi_op(op), comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::all_gather(const void* send, void* recv, size_t send_count, DType t,
                                 const Options& o) {
  int n = checked_int(send_count);
  checked_int(send_count * size_);
  uint64_t bytes = (size_ - 1) * send_count * dtype_size(t);
  return submit(OpKind::AllGather, std::to_string(send_count) + " " + type_name(t) + " per rank",
                bytes, o, [=, this] {
                  MPI_Request r;
                  MPI_Iallgather(send, n, mpi_type(t), recv, n, mpi_type(t), comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::all_to_all(const void* send, void* recv, size_t count, DType t,
                                 const Options& o) {
  int n = checked_int(count);
  checked_int(count * size_);
  // Every rank keeps its own block and sends the other d-1.
  uint64_t bytes = (size_ - 1) * count * dtype_size(t);
  return submit(OpKind::AllToAll, std::to_string(count) + " " + type_name(t) + " per rank",
                bytes, o, [=, this] {
                  MPI_Request r;
                  MPI_Ialltoall(send, n, mpi_type(t), recv, n, mpi_type(t), comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::broadcast(void* buf, size_t count, DType t, int root, const Options& o) {
  int n = checked_int(count);
  uint64_t bytes = (rank_ == root && size_ > 1) ? count * dtype_size(t) : 0;
  return submit(OpKind::Broadcast,
                std::to_string(count) + " " + type_name(t) + " from " + std::to_string(root),
                bytes, o, [=, this] {
                  MPI_Request r;
                  MPI_Ibcast(buf, n, mpi_type(t), root, comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::barrier(const Options& o) {
  return submit(OpKind::Barrier, "", 0, o, [this] {
    MPI_Request r;
    MPI_Ibarrier(comm_, &r);
    return r;
  });
}

WorkPtr Communicator::send(const void* buf, size_t count, DType t, int dst, int tag,
                           const Options& o) {
  int n = checked_int(count);
  return submit(OpKind::Send,
                std::to_string(count) + " " + type_name(t) + " to " + std::to_string(dst) +
                    " tag " + std::to_string(tag),
                count * dtype_size(t), o, [=, this] {
                  MPI_Request r;
                  MPI_Isend(buf, n, mpi_type(t), dst, tag, comm_, &r);
                  return r;
                });
}

WorkPtr Communicator::recv(void* buf, size_t count, DType t, int src, int tag, const Options& o) {
  int n = checked_int(count);
  return submit(OpKind::Recv,
                std::to_string(count) + " " + type_name(t) + " from " + std::to_string(src) +
                    " tag " + std::to_string(tag),
                0, o, [=, this] {
                  MPI_Request r;
                  MPI_Irecv(buf, n, mpi_type(t), src, tag, comm_, &r);
                  return r;
                });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key,
                                                  const std::string& name) const {
  // MPI_Comm_split is blocking and must not race the engine thread: run it there.
  MPI_Comm out = MPI_COMM_NULL;
  auto work = std::make_shared<Work>("split of '" + name_ + "'", default_timeout());
  Engine::Op op;
  op.work = work;
  op.post = [&] {
    MPI_Comm_split(comm_, color, key, &out);
    return MPI_REQUEST_NULL;
  };
  Engine::instance().submit(std::move(op));
  work->wait();
  return std::make_unique<Communicator>(out, name, true);
}

Stats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Communicator::reset_stats() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = Stats{};
}

}  // namespace loom::comm
