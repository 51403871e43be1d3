#include "loom/parallel/grad_sync.h"

#include "loom/common/error.h"
#include "loom/parallel/allreduce_sync.h"

namespace loom::parallel {

std::unique_ptr<GradSync> make_grad_sync(const SyncContext& ctx) {
  const std::string& mode = ctx.cfg->parallel.dp_mode;
  if (mode == "allreduce") return std::make_unique<AllReduceSync>(ctx);
  LOOM_USAGE("parallel.dp_mode '", mode,
             "' is not implemented yet in this build; use --dp-mode allreduce");
}

}  // namespace loom::parallel
