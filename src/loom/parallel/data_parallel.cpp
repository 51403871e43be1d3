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
  using config::DpMode;
  switch (const DpMode mode = ctx.cfg->parallel.dp_mode) {
    case DpMode::AllReduce: return std::make_unique<AllReduceSync>(ctx);
    case DpMode::Slim: return std::make_unique<SlimSync>(ctx);
    case DpMode::Quant: return std::make_unique<QuantSync>(ctx);
    case DpMode::Zero1:
    case DpMode::Zero2:
    case DpMode::Zero3: return std::make_unique<ZeroSync>(ctx, config::zero_level(mode));
  }
  LOOM_CHECK(false, "unknown parallel.dp_mode");
}

}  // namespace loom::parallel
