#include "loom/parallel/allreduce_sync.h"

namespace loom::parallel {

BufferOptions allreduce_buffer_options(const config::Config& cfg) {
  BufferOptions o;
  o.buckets = true;
  o.bucket_mib = cfg.parallel.bucket_mib;
  o.bf16_reduce = cfg.parallel.grad_reduce == config::Precision::Bf16;
  return o;
}

AllReduceSync::AllReduceSync(const SyncContext& ctx)
    : DataParallel(ctx, allreduce_buffer_options(*ctx.cfg)) {}

}  // namespace loom::parallel
