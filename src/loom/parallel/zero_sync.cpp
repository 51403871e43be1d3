#include "loom/parallel/zero_sync.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

BufferOptions sharded(const config::Config& cfg, int level) {
  LOOM_CHECK(level >= 1 && level <= 3, "ZeroSync level must be 1, 2 or 3, got ", level);
  BufferOptions o;
  o.sharded = true;
  o.transient_grads = level >= 2;
  o.transient_params = level == 3;
  o.buckets = level == 1;
  o.bucket_mib = cfg.parallel.bucket_mib;
  o.bf16_reduce = cfg.parallel.grad_reduce == config::Precision::Bf16;
  return o;
}

}  // namespace

ZeroSync::ZeroSync(const SyncContext& ctx, int level)
    : DataParallel(ctx, sharded(*ctx.cfg, level)), level_(level) {}

void ZeroSync::unshard() {
  if (level_ == 3) buffer_.start_param_sync();  // no-op while already (being) gathered
}

void ZeroSync::before_compute(bool backward) {
  // Schedules without UNSHARD (dp = 1 lowers no data-parallel actions, hand-written CSVs)
  // gather on demand here; normally the all-gather was started earlier and has finished.
  unshard();
  buffer_.finish_param_sync();
  if (backward) buffer_.ensure_grads();
}

void ZeroSync::before_step() {
  buffer_.finish_param_sync();  // the previous all-gather reads the master shard
  buffer_.drop_params();        // zero3: a copy still gathered (dp = 1) would be stale
}

void ZeroSync::after_step() {
  buffer_.zero_grads();                        // zero1: the parameters' gradients are views
  if (level_ < 3) buffer_.start_param_sync();  // waited for before the stage's next compute
}

std::vector<NamedParam> ZeroSync::full_params() {
  torch::Tensor flat = buffer_.gathered_copy();  // zero3 between uses: a collective
  std::vector<NamedParam> out;
  const auto& named = stage_->params();
  for (size_t i = 0; i < named.size(); ++i)
    out.push_back({named[i].name, buffer_.layout().view(flat, i).clone()});
  return out;
}

std::vector<DataParallel::Piece> ZeroSync::pieces() const {
  const FlatLayout& l = buffer_.layout();
  const int64_t lo = int64_t(dp_->rank()) * l.shard, hi = lo + l.shard;
  std::vector<Piece> out;
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const int64_t from = std::max(lo, l.slots[i].offset);
    const int64_t to = std::min(hi, l.slots[i].offset + l.slots[i].numel);
    if (from < to) out.push_back({0, i, from - lo, from - l.slots[i].offset, to - from});
  }
  return out;
}

void ZeroSync::after_load() {
  if (level_ < 3) {
    buffer_.start_param_sync();
    buffer_.finish_param_sync();
  } else {
    buffer_.drop_params();
  }
}

}  // namespace loom::parallel
