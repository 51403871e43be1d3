#include "loom/parallel/allreduce_sync.h"

namespace loom::parallel {
namespace {

BufferOptions replicated_buckets(const config::Config& cfg) {
  BufferOptions o;
  o.buckets = true;
  o.bucket_mib = cfg.parallel.bucket_mib;
  o.bf16_reduce = cfg.parallel.grad_reduce == config::Precision::Bf16;
  return o;
}

}  // namespace

AllReduceSync::AllReduceSync(const SyncContext& ctx)
    : DataParallel(ctx, replicated_buckets(*ctx.cfg)) {}

}  // namespace loom::parallel
