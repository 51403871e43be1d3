#include "loom/parallel/data_parallel.h"

#include "loom/common/error.h"
#include "loom/parallel/allreduce_sync.h"
#include "loom/parallel/quant_sync.h"
#include "loom/parallel/slim_sync.h"
#include "loom/parallel/zero_sync.h"

namespace loom::parallel {

std::vector<torch::Tensor> DataParallel::stage_tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : stage_->params()) out.push_back(p.tensor);
  return out;
}

std::unique_ptr<DataParallel> make_data_parallel(const SyncContext& ctx) {
  const std::string& mode = ctx.cfg->parallel.dp_mode;
  if (mode == "allreduce") return std::make_unique<AllReduceSync>(ctx);
  if (mode == "slim") return std::make_unique<SlimSync>(ctx);
  if (mode == "quant") return std::make_unique<QuantSync>(ctx);
  if (mode == "zero1" || mode == "zero2" || mode == "zero3")
    return std::make_unique<ZeroSync>(ctx, mode.back() - '0');
  LOOM_USAGE("parallel.dp_mode '", mode,
             "' is not implemented yet in this build; use --dp-mode allreduce");
}

}  // namespace loom::parallel
