#include "loom/comm/backend.h"

#include <torch/torch.h>

#include <algorithm>
#include <sstream>

#include "loom/comm/comm_failure.h"
#include "loom/comm/rank_hosts.h"
#include "loom/common/error.h"

namespace loom::comm {
namespace {

torch::Dtype torch_dtype(DType t) {
  switch (t) {
    case DType::Float32: return torch::kFloat32;
    case DType::Float64: return torch::kFloat64;
    case DType::Int32: return torch::kInt32;
    case DType::Int64: return torch::kInt64;
    case DType::UInt8: return torch::kUInt8;
    case DType::BFloat16: return torch::kBFloat16;
  }
  return torch::kUInt8;
}

// A CPU tensor over caller-owned host memory (no copy, no ownership).
at::Tensor host(const void* p, size_t count, DType t) {
  // from_blob needs a non-null pointer even for zero elements.
  static double empty_slot[1];
  void* data = const_cast<void*>(p ? p : empty_slot);
  return torch::from_blob(data, {static_cast<int64_t>(count)},
                          torch::TensorOptions().dtype(torch_dtype(t)));
}

std::string describe(const at::Tensor& t) {
  std::ostringstream os;
  os << t.numel() << " " << c10::toString(t.scalar_type());
  if (!t.device().is_cpu()) os << " on " << t.device();
  return os.str();
}

void check_dense(const at::Tensor& t, const char* what) {
  LOOM_CHECK(t.defined() && t.is_contiguous(), what, " must be a defined, contiguous tensor");
}

// `whole` holds one block of `block`'s size per rank, of the same type.
void check_blocks(const char* op, const at::Tensor& whole, const at::Tensor& block, int ranks) {
  check_dense(whole, op);
  check_dense(block, op);
  LOOM_CHECK_EQ(whole.numel(), block.numel() * ranks, op, ": one block per rank expected");
  LOOM_CHECK(whole.scalar_type() == block.scalar_type(), op, ": input and output types differ");
}

uint64_t nbytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

}  // namespace

Backend::Backend(std::string name, int rank, int size)
    : name_(std::move(name)), rank_(rank), size_(size) {}

Backend::~Backend() = default;

std::string Backend::peer(int r) const {
  if (r < 0 || r >= size_) return std::to_string(r);
  const std::string host = host_of_rank(world_rank(r));
  const std::string on = host.empty() ? "" : " on " + host;
  if (world_ranks_.empty())
    return host.empty() ? std::to_string(r) : detail::concat(r, " (", host, ")");
  return detail::concat(r, " (world rank ", world_ranks_[r], on, ")");
}

WorkPtr Backend::counted(OpKind op, const std::string& detail, uint64_t bytes, const Options& o,
                         const std::function<WorkPtr(const Call&)>& post) {
  std::ostringstream what;
  what << op_name(op) << "(" << detail << ") on communicator '" << name_ << "' (rank " << rank_
       << " of " << size_;
  if (!world_ranks_.empty()) {
    what << ": world ranks";
    for (int r = 0; r < size_; ++r) what << (r ? "," : " ") << world_ranks_[r];
  }
  // Across hosts: where the group's ranks are (a peer that stops answering is most often a
  // host or a link that went away).
  if (op != OpKind::Send && op != OpKind::Recv && rank_hosts_known()) {
    std::vector<int> members(size_);
    for (int r = 0; r < size_; ++r) members[r] = world_rank(r);
    if (const std::string on = hosts_of(members); !on.empty()) what << "; ranks " << on;
  }
  what << ", " << backend_name(kind()) << ")";
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.calls[static_cast<int>(op)] += 1;
    stats_.bytes[static_cast<int>(op)] += bytes;
  }
  const LinkEmulation& e = link_emulation();
  Call c{op, what.str(), e.active() ? e.delay_s(bytes) : 0.0, o};
  WorkPtr w;
  try {
    w = post(c);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // Gloo's send to a peer that is gone fails right here
    throw communication_failed(c.what, e.what());
  }
  w->on_complete([this](double busy) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.busy_s += busy;
  });
  return w;
}

// Bytes are those this rank sends under a ring algorithm (types.h).
WorkPtr Backend::all_reduce(const at::Tensor& t, ReduceOp op, const Options& o) {
  check_dense(t, "all_reduce's tensor");
  const uint64_t bytes = 2 * (size_ - 1) * nbytes(t) / size_;
  return counted(OpKind::AllReduce, describe(t), bytes, o,
                 [&](const Call& c) { return do_all_reduce(t, op, c); });
}

WorkPtr Backend::reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op,
                                const Options& o) {
  check_blocks("reduce_scatter", in, out, size_);
  const uint64_t bytes = (size_ - 1) * nbytes(out);
  return counted(OpKind::ReduceScatter, describe(out) + " per rank", bytes, o,
                 [&](const Call& c) { return do_reduce_scatter(in, out, op, c); });
}

WorkPtr Backend::all_gather(const at::Tensor& in, const at::Tensor& out, const Options& o) {
  check_blocks("all_gather", out, in, size_);
  const uint64_t bytes = (size_ - 1) * nbytes(in);
  return counted(OpKind::AllGather, describe(in) + " per rank", bytes, o,
                 [&](const Call& c) { return do_all_gather(in, out, c); });
}

WorkPtr Backend::all_to_all(const at::Tensor& in, const at::Tensor& out, const Options& o) {
  check_dense(in, "all_to_all's input");
  check_dense(out, "all_to_all's output");
  LOOM_CHECK_EQ(in.numel(), out.numel(), "all_to_all: input and output sizes differ");
  LOOM_CHECK_EQ(in.numel() % size_, 0, "all_to_all: size must be a multiple of the ranks");
  // Every rank keeps its own block and sends the other d-1.
  const uint64_t bytes = (size_ - 1) * nbytes(in) / size_;
  return counted(OpKind::AllToAll, describe(in), bytes, o,
                 [&](const Call& c) { return do_all_to_all(in, out, c); });
}

WorkPtr Backend::broadcast(const at::Tensor& t, int root, const Options& o) {
  check_dense(t, "broadcast's tensor");
  LOOM_CHECK(root >= 0 && root < size_, "broadcast root ", root, " out of range");
  const uint64_t bytes = (rank_ == root && size_ > 1) ? nbytes(t) : 0;
  return counted(OpKind::Broadcast, describe(t) + " from " + std::to_string(root), bytes, o,
                 [&](const Call& c) { return do_broadcast(t, root, c); });
}

WorkPtr Backend::barrier(const Options& o) {
  return counted(OpKind::Barrier, "", 0, o, [&](const Call& c) { return do_barrier(c); });
}

WorkPtr Backend::send(const at::Tensor& t, int dst, int tag, const Options& o) {
  check_dense(t, "send's tensor");
  LOOM_CHECK(dst >= 0 && dst < size_, "send to rank ", dst, " of ", size_);
  LOOM_CHECK(tag >= 0 && tag <= max_tag(), "tag ", tag, " beyond the backend's ", max_tag());
  return counted(OpKind::Send, describe(t) + " to " + peer(dst) + " tag " + std::to_string(tag),
                 nbytes(t), o, [&](const Call& c) { return do_send(t, dst, tag, c); });
}

WorkPtr Backend::recv(const at::Tensor& t, int src, int tag, const Options& o) {
  check_dense(t, "recv's tensor");
  LOOM_CHECK(src >= 0 && src < size_, "recv from rank ", src, " of ", size_);
  LOOM_CHECK(tag >= 0 && tag <= max_tag(), "tag ", tag, " beyond the backend's ", max_tag());
  return counted(OpKind::Recv, describe(t) + " from " + peer(src) + " tag " + std::to_string(tag),
                 0, o, [&](const Call& c) { return do_recv(t, src, tag, c); });
}

WorkPtr Backend::all_reduce(void* buf, size_t count, DType t, ReduceOp op, const Options& o) {
  return all_reduce(host(buf, count, t), op, o);
}
WorkPtr Backend::reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                                ReduceOp op, const Options& o) {
  return reduce_scatter(host(send, recv_count * size_, t), host(recv, recv_count, t), op, o);
}
WorkPtr Backend::all_gather(const void* send, void* recv, size_t send_count, DType t,
                            const Options& o) {
  return all_gather(host(send, send_count, t), host(recv, send_count * size_, t), o);
}
WorkPtr Backend::all_to_all(const void* send, void* recv, size_t count, DType t, const Options& o) {
  return all_to_all(host(send, count * size_, t), host(recv, count * size_, t), o);
}
WorkPtr Backend::broadcast(void* buf, size_t count, DType t, int root, const Options& o) {
  return broadcast(host(buf, count, t), root, o);
}
WorkPtr Backend::send(const void* buf, size_t count, DType t, int dst, int tag, const Options& o) {
  return send(host(buf, count, t), dst, tag, o);
}
WorkPtr Backend::recv(void* buf, size_t count, DType t, int src, int tag, const Options& o) {
  return recv(host(buf, count, t), src, tag, o);
}

WorkPtr Backend::all_to_all_v(const std::vector<std::span<const uint8_t>>& send,
                              std::vector<std::vector<uint8_t>>& recv, int tag, const Options& o) {
  LOOM_CHECK_EQ(static_cast<int>(send.size()), size_, "all_to_all_v: one string per rank");
  LOOM_CHECK(tag >= 0 && tag <= max_tag(), "tag ", tag, " beyond the backend's ", max_tag());
  std::vector<int64_t> out(size_), in(size_);
  for (int j = 0; j < size_; ++j) out[j] = static_cast<int64_t>(send[j].size());
  all_to_all(out.data(), in.data(), 1, DType::Int64, o)->wait();
  recv.resize(size_);
  uint64_t bytes = 0;
  for (int j = 0; j < size_; ++j) {
    recv[j].resize(static_cast<size_t>(in[j]));
    if (j != rank_) bytes += send[j].size();
  }
  std::copy(send[rank_].begin(), send[rank_].end(), recv[rank_].begin());
  const std::string what = detail::concat(bytes, " bytes in strings, tag ", tag);
  return counted(OpKind::AllToAll, what, bytes, o, [&](const Call& c) {
    std::vector<WorkPtr> parts;
    // Receive from rank - k while sending to rank + k: both directions of every pair at once.
    for (int k = 1; k < size_; ++k) {
      const int from = (rank_ - k + size_) % size_, to = (rank_ + k) % size_;
      if (in[from] > 0) {
        const Call part{OpKind::Recv, c.what + ": its recv from " + peer(from), 0.0, o};
        parts.push_back(
            do_recv(host(recv[from].data(), recv[from].size(), DType::UInt8), from, tag, part));
      }
      if (!send[to].empty()) {
        const Call part{OpKind::Send, c.what + ": its send to " + peer(to), 0.0, o};
        parts.push_back(
            do_send(host(send[to].data(), send[to].size(), DType::UInt8), to, tag, part));
      }
    }
    return std::make_shared<WorkGroup>(c.what, o.timeout, c.delay_s, std::move(parts));
  });
}

std::unique_ptr<Backend> Backend::split(int color, int key, const std::string& name) {
  // Everybody learns everybody's (color, key); the members of a color are ordered by key,
  // then by rank here.
  std::vector<int64_t> mine = {color, key}, all(2 * size_);
  all_gather(mine.data(), all.data(), 2, DType::Int64)->wait();
  std::vector<std::pair<int64_t, int>> same;
  for (int r = 0; r < size_; ++r)
    if (all[2 * r] == color) same.emplace_back(all[2 * r + 1], r);
  std::sort(same.begin(), same.end());
  std::vector<int> members;
  for (auto& [k, r] : same) members.push_back(r);
  std::unique_ptr<Backend> child = do_split(members, color, name);
  for (int m : members) child->world_ranks_.push_back(world_rank(m));
  return child;
}

Backend& Backend::host_world() {
  if (!host_world_) {
    host_world_ = make_host_world();  // nullptr (this one) is cheap to ask for again
    if (host_world_) host_world_->world_ranks_ = world_ranks_;
  }
  return host_world_ ? *host_world_ : *this;
}

Stats Backend::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Backend::reset_stats() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = Stats{};
}

double sum_over(Backend& c, double v) {
  c.all_reduce(&v, 1, DType::Float64)->wait();
  return v;
}

}  // namespace loom::comm
