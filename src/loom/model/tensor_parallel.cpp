#include "loom/model/tensor_parallel.h"

#include "loom/comm/backend.h"
#include "loom/common/error.h"

namespace loom::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Autograd contexts keep only IValues: the group travels as its address (it outlives every
// graph: the trainer's mesh owns it).
comm::Backend* backend_at(int64_t address) {
  return reinterpret_cast<comm::Backend*>(address);  // NOLINT(performance-no-int-to-ptr)
}

comm::Backend* group(AutogradContext* ctx) {
  return backend_at(ctx->saved_data["comm"].toInt());
}

int64_t handle(const TensorParallel& tp) {
  LOOM_CHECK(tp.comm != nullptr, "tensor parallelism without a communicator");
  return reinterpret_cast<int64_t>(tp.comm);
}

torch::Tensor summed(const torch::Tensor& x, comm::Backend& c) {
  torch::Tensor out = x.contiguous().clone();
  c.all_reduce(out)->wait();
  return out;
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad) {
    return {summed(grad[0], *group(ctx)), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    // The partial sums (a row-parallel product's output, a part of the embedding) are summed
    // where they lie: nothing keeps them for a backward, and a copy would be one [M, h] more
    // at a recomputed layer's peak. Marked dirty, so that a backward which did keep them
    // fails loudly rather than reading the sums.
    if (!x.is_contiguous()) return summed(x, *backend_at(comm));
    ctx->mark_dirty({x});
    backend_at(comm)->all_reduce(x)->wait();
    return x;
  }
  static tensor_list backward(AutogradContext*, tensor_list grad) {
    return {grad[0], torch::Tensor()};
  }
};

// All-gather along the sequence (gather = true) or reduce-scatter along it; the backward of
// each is the other.
struct SequenceExchange : torch::autograd::Function<SequenceExchange> {
  static torch::Tensor exchange(const torch::Tensor& x, comm::Backend& c, bool gather) {
    return gather ? gather_sequence(x, c) : scatter_sequence_sum(x, c);
  }
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm,
                               bool gather) {
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["gather"] = gather;
    return exchange(x, *backend_at(comm), gather);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad) {
    const bool gathered = ctx->saved_data["gather"].toBool();
    return {exchange(grad[0], *group(ctx), !gathered), torch::Tensor(), torch::Tensor()};
  }
};

// The local name of a parameter: "qkv.weight" of "blocks.3.qkv.weight".
std::string local_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return name;
  const size_t module = name.rfind('.', dot - 1);
  return module == std::string::npos ? name : name.substr(module + 1);
}

}  // namespace

SequenceGather::SequenceGather(const torch::Tensor& part, comm::Backend& group)
    : part_(part.contiguous()),
      all_(torch::empty({group.size(), part.size(0), part.size(1), part.size(2)}, part.options())),
      work_(group.all_gather(part_, all_)) {}

torch::Tensor SequenceGather::wait() {
  work_->wait();
  const int64_t parts = all_.size(0), b = all_.size(1), n = all_.size(2), h = all_.size(3);
  return all_.permute({1, 0, 2, 3}).reshape({b, parts * n, h});
}

torch::Tensor gather_sequence(const torch::Tensor& part, comm::Backend& group) {
  return SequenceGather(part, group).wait();
}

torch::Tensor scatter_sequence_sum(const torch::Tensor& whole, comm::Backend& group) {
  const int64_t parts = group.size(), b = whole.size(0), s = whole.size(1), h = whole.size(2);
  LOOM_CHECK(s % parts == 0, "sequence of ", s, " does not split into ", parts);
  torch::Tensor blocks = whole.reshape({b, parts, s / parts, h}).permute({1, 0, 2, 3}).contiguous();
  torch::Tensor mine = torch::empty({b, s / parts, h}, whole.options());
  group.reduce_scatter(blocks, mine)->wait();
  return mine;
}

torch::Tensor copy_to_tp(const torch::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return CopyToTp::apply(x, handle(tp));
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return ReduceFromTp::apply(x, handle(tp));
}

torch::Tensor enter_split(const torch::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  if (tp.sequence) return SequenceExchange::apply(x, handle(tp), true);
  return CopyToTp::apply(x, handle(tp));
}

torch::Tensor leave_split(const torch::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  if (tp.sequence) return SequenceExchange::apply(x, handle(tp), false);
  return ReduceFromTp::apply(x, handle(tp));
}

torch::Tensor replicated(const torch::Tensor& param, const TensorParallel& tp) {
  return tp.size > 1 && tp.sequence ? CopyToTp::apply(param, handle(tp)) : param;
}

torch::Tensor vocab_parallel_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                  const TensorParallel& tp) {
  const int64_t part = logits.size(-1), begin = part * tp.rank;
  const torch::Tensor l = logits.reshape({-1, part});
  const torch::Tensor t = target.reshape({-1});
  torch::Tensor top;  // the row maxima over the whole vocabulary: only a shift, no gradient
  {
    torch::NoGradGuard no_grad;
    top = std::get<0>(l.max(1)).contiguous();
    if (tp.size > 1) tp.comm->all_reduce(top, comm::ReduceOp::Max)->wait();
  }
  const torch::Tensor shifted = l - top.unsqueeze(1);
  const torch::Tensor sum_exp = reduce_from_tp(shifted.exp().sum(1), tp);
  const torch::Tensor local = t - begin;
  const torch::Tensor mine = (local >= 0).logical_and(local < part);
  const torch::Tensor picked =
      shifted.gather(1, local.clamp(0, part - 1).unsqueeze(1)).squeeze(1) * mine.to(l.dtype());
  return (sum_exp.log() - reduce_from_tp(picked, tp)).mean();
}

namespace {

// Row-parallel weights, split along their input (dim 1); every other split parameter is
// column-parallel (dim 0). gpt: proj, out; llama: o, down.
bool row_parallel(const std::string& local) {
  return local == "proj.weight" || local == "out.weight" || local == "o.weight" ||
         local == "down.weight";
}

}  // namespace

bool tp_split(const std::string& name) {
  const std::string n = local_name(name);
  return n == "qkv.weight" || n == "qkv.bias" || n == "fc.weight" || n == "fc.bias" ||
         row_parallel(n) || n == "tok.weight" || n == "head.weight" || n == "head.bias" ||
         n == "q.weight" || n == "k.weight" || n == "v.weight" || n == "gate.weight" ||
         n == "up.weight";
}

torch::Tensor tp_shard(const std::string& name, const torch::Tensor& full, int rank, int parts) {
  if (parts == 1 || !tp_split(name)) return full;
  const std::string n = local_name(name);
  const int dim = row_parallel(n) ? 1 : 0;
  if (n == "qkv.weight" || n == "qkv.bias") {  // Q, K and V each by heads
    std::vector<torch::Tensor> pieces;
    for (const auto& third : full.chunk(3, 0)) pieces.push_back(third.chunk(parts, 0)[rank]);
    return torch::cat(pieces, 0);
  }
  LOOM_CHECK(full.size(dim) % parts == 0, name, " of size ", full.size(dim), " in dim ", dim,
             " does not split into ", parts);
  return full.chunk(parts, dim)[rank];
}

torch::Tensor tp_unshard(const std::string& name, const std::vector<torch::Tensor>& parts) {
  LOOM_CHECK(!parts.empty(), "no parts of ", name);
  if (parts.size() == 1 || !tp_split(name)) return parts.front();
  const std::string n = local_name(name);
  if (n == "qkv.weight" || n == "qkv.bias") {  // each part holds its heads of Q, K and V
    std::vector<torch::Tensor> q, k, v;
    for (const auto& p : parts) {
      auto three = p.chunk(3, 0);
      q.push_back(three[0]);
      k.push_back(three[1]);
      v.push_back(three[2]);
    }
    return torch::cat({torch::cat(q, 0), torch::cat(k, 0), torch::cat(v, 0)}, 0);
  }
  return torch::cat(parts, row_parallel(n) ? 1 : 0);
}

}  // namespace loom::model
