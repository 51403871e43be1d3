#include "loom/comm/mpi_backend.h"

#include <torch/torch.h>

#include "loom/comm/host_staging.h"
#include "loom/comm/mpi_engine.h"
#include "loom/common/error.h"

namespace loom::comm {
namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

int size_of(MPI_Comm c) {
  int s = 1;
  MPI_Comm_size(c, &s);
  return s;
}

MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kBFloat16: return MPI_UINT16_T;  // reductions: the bf16 operations below
    default: break;
  }
  throw Error(detail::concat("the mpi backend cannot reduce or move ", t.scalar_type(),
                             " tensors; use --comm gloo or nccl"));
}

// MPI has no bf16 type: bf16 travels as 16-bit words, reduced by these (in fp32, rounded to
// nearest even as torch rounds).
template <typename F>
void bf16_combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const c10::BFloat16*>(in);
  auto* b = static_cast<c10::BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = c10::BFloat16(F{}(float(a[i]), float(b[i])));
}
struct Add {
  float operator()(float a, float b) const { return a + b; }
};
struct Larger {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
struct Smaller {
  float operator()(float a, float b) const { return a < b ? a : b; }
};
MPI_Op created(MPI_User_function* f) {
  MPI_Op o = MPI_OP_NULL;
  MPI_Op_create(f, /*commute=*/1, &o);
  return o;
}
MPI_Op bf16_op(ReduceOp op) {
  static const MPI_Op sum = created(&bf16_combine<Add>), max = created(&bf16_combine<Larger>),
                      min = created(&bf16_combine<Smaller>);
  return op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? max : min;
}

MPI_Op mpi_op(ReduceOp op, MPI_Datatype type) {
  if (type == MPI_UINT16_T) return bf16_op(op);
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

int checked_int(int64_t count) {
  LOOM_CHECK_LE(count, int64_t(INT32_MAX), "message too large for one MPI call");
  return static_cast<int>(count);
}

// Posts one MPI call on the engine thread; `keep` holds the buffers alive until completion.
// `quiet`: the transfer needs no progress from this process until someone waits (Engine::Op).
WorkPtr post(const Backend::Call& c, const std::vector<Staged>& keep,
             std::function<MPI_Request()> call, bool quiet = false) {
  auto work = std::make_shared<EngineWork>(c.what, c.options.timeout, c.delay_s);
  std::vector<at::Tensor> alive;
  for (auto& s : keep) alive.push_back(s.wire);
  copy_back_on_completion(*work, keep);
  Engine::Op op;
  op.work = work;
  op.quiet = quiet;
  op.post = [call = std::move(call), alive = std::move(alive)] { return call(); };
  Engine::instance().submit(std::move(op));
  return work;
}

// An operation on one buffer: read from it when `input`, written into when `output`.
WorkPtr post_one(const Backend::Call& c, const at::Tensor& t, bool input, bool output,
                 std::function<void(void*, int, MPI_Datatype, MPI_Request*)> call,
                 bool quiet = false) {
  Staged s = stage(t, input, output);
  const int n = checked_int(t.numel());
  void* buf = s.wire.data_ptr();
  MPI_Datatype type = mpi_type(t);
  return post(
      c, {s},
      [=, call = std::move(call)] {
        MPI_Request r;
        call(buf, n, type, &r);
        return r;
      },
      quiet);
}

std::vector<bool>& quiet_world_ranks() {
  static std::vector<bool> quiet;
  return quiet;
}

// A collective from `in` to `out` that moves blocks of `block` elements per rank.
WorkPtr post_in_out(const Backend::Call& c, const at::Tensor& in, const at::Tensor& out,
                    int64_t block,
                    std::function<void(const void*, void*, int, MPI_Datatype, MPI_Request*)> call) {
  Staged si = stage(in, true, false), so = stage(out, false, true);
  checked_int(in.numel());
  checked_int(out.numel());
  const int n = checked_int(block);
  const void* send = si.wire.data_ptr();
  void* recv = so.wire.data_ptr();
  MPI_Datatype type = mpi_type(in);
  return post(c, {si, so}, [=, call = std::move(call)] {
    MPI_Request r;
    call(send, recv, n, type, &r);
    return r;
  });
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, std::string name, bool owned)
    : Backend(std::move(name), rank_of(comm), size_of(comm)), comm_(comm), owned_(owned) {
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) max_tag_ = *ub;
  // Which of this communicator's ranks are quiet peers: their world ranks, looked up.
  const std::vector<bool>& quiet = quiet_world_ranks();
  if (quiet.empty()) return;
  for (int w : world_ranks_of(comm_))
    quiet_peer_.push_back(w >= 0 && w < int(quiet.size()) && quiet[w]);
}

std::vector<int> world_ranks_of(MPI_Comm comm) {
  const int n = size_of(comm);
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(n), in_world(n);
  for (int r = 0; r < n; ++r) ranks[r] = r;
  MPI_Group_translate_ranks(mine, n, ranks.data(), world, in_world.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  return in_world;
}

void MpiBackend::set_quiet_world_ranks(std::vector<bool> quiet) {
  quiet_world_ranks() = std::move(quiet);
}

bool MpiBackend::quiet_peer(int rank) const {
  return rank >= 0 && rank < int(quiet_peer_.size()) && quiet_peer_[rank];
}

MpiBackend::~MpiBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

WorkPtr MpiBackend::do_all_reduce(const at::Tensor& t, ReduceOp op, const Call& c) {
  return post_one(c, t, true, true, [this, op](void* b, int n, MPI_Datatype y, MPI_Request* q) {
    MPI_Iallreduce(MPI_IN_PLACE, b, n, y, mpi_op(op, y), comm_, q);
  });
}

WorkPtr MpiBackend::do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op,
                                      const Call& c) {
  return post_in_out(c, in, out, out.numel(),
                     [this, op](const void* s, void* r, int n, MPI_Datatype t, MPI_Request* q) {
                       MPI_Ireduce_scatter_block(s, r, n, t, mpi_op(op, t), comm_, q);
                     });
}

WorkPtr MpiBackend::do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call& c) {
  return post_in_out(c, in, out, in.numel(),
                     [this](const void* s, void* r, int n, MPI_Datatype t, MPI_Request* q) {
                       MPI_Iallgather(s, n, t, r, n, t, comm_, q);
                     });
}

WorkPtr MpiBackend::do_all_to_all(const at::Tensor& in, const at::Tensor& out, const Call& c) {
  return post_in_out(c, in, out, in.numel() / size(),
                     [this](const void* s, void* r, int n, MPI_Datatype t, MPI_Request* q) {
                       MPI_Ialltoall(s, n, t, r, n, t, comm_, q);
                     });
}

WorkPtr MpiBackend::do_broadcast(const at::Tensor& t, int root, const Call& c) {
  return post_one(c, t, rank() == root, rank() != root,
                  [this, root](void* b, int n, MPI_Datatype y, MPI_Request* q) {
                    MPI_Ibcast(b, n, y, root, comm_, q);
                  });
}

WorkPtr MpiBackend::do_barrier(const Call& c) {
  return post(c, {}, [this] {
    MPI_Request r;
    MPI_Ibarrier(comm_, &r);
    return r;
  });
}

WorkPtr MpiBackend::do_send(const at::Tensor& t, int dst, int tag, const Call& c) {
  return post_one(
      c, t, true, false,
      [this, dst, tag](void* b, int n, MPI_Datatype y, MPI_Request* q) {
        MPI_Isend(b, n, y, dst, tag, comm_, q);
      },
      quiet_peer(dst));
}

WorkPtr MpiBackend::do_recv(const at::Tensor& t, int src, int tag, const Call& c) {
  return post_one(
      c, t, false, true,
      [this, src, tag](void* b, int n, MPI_Datatype y, MPI_Request* q) {
        MPI_Irecv(b, n, y, src, tag, comm_, q);
      },
      quiet_peer(src));
}

std::unique_ptr<Backend> MpiBackend::do_split(const std::vector<int>& members, int color,
                                              const std::string& name) {
  int key = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == rank()) key = static_cast<int>(i);
  // MPI_Comm_split is blocking and must not race the engine thread: run it there.
  MPI_Comm out = MPI_COMM_NULL;
  auto work = std::make_shared<EngineWork>("split of '" + this->name() + "'", default_timeout());
  Engine::Op op;
  op.work = work;
  op.post = [&] {
    MPI_Comm_split(comm_, color, key, &out);
    return MPI_REQUEST_NULL;
  };
  Engine::instance().submit(std::move(op));
  work->wait();
  return std::make_unique<MpiBackend>(out, name, true);
}

}  // namespace loom::comm
