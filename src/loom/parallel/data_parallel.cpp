#include "loom/parallel/data_parallel.h"

#include "loom/common/error.h"
#include "loom/parallel/allreduce_sync.h"
#include "loom/parallel/diloco_sync.h"
#include "loom/parallel/powersgd_sync.h"
#include "loom/parallel/quant_sync.h"
#include "loom/parallel/slim_sync.h"
#include "loom/parallel/zero_sync.h"

namespace loom::parallel {

std::vector<torch::Tensor> DataParallel::stage_tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : stage_->params()) out.push_back(p.tensor);
  return out;
}

void DataParallel::put_flat(ChunkWriter& w, const std::string& key, int replica,
                            const float* flat) const {
  const FlatLayout& l = buffer_.layout();
  const auto& named = stage_->params();
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const auto& s = l.slots[i];
    auto t = torch::from_blob(const_cast<float*>(flat) + s.offset, {s.numel}, torch::kFloat32);
    w.put_copy(key + "/" + checkpoint_name(named[i]), replica, 0, s.shape, t);
  }
}

bool DataParallel::get_flat(const ChunkReader& r, const std::string& key, int replica,
                            float* flat) const {
  const FlatLayout& l = buffer_.layout();
  const auto& named = stage_->params();
  if (l.slots.empty() || !r.has(key + "/" + checkpoint_name(named[0]), replica)) return false;
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const auto& s = l.slots[i];
    auto t = torch::from_blob(flat + s.offset, {s.numel}, torch::kFloat32);
    if (!r.get(key + "/" + checkpoint_name(named[i]), replica, 0, t))
      LOOM_USAGE("checkpoint holds '", key, "' for some parameters of stage ", stage_->index(),
                 " but not for '", named[i].name, "'; it is incomplete");
  }
  return true;
}

std::vector<DataParallel::Piece> DataParallel::pieces() const {
  std::vector<Piece> out;
  const auto& named = stage_->params();
  for (size_t i = 0; i < named.size(); ++i) out.push_back({i, i, 0, 0, named[i].tensor.numel()});
  return out;
}

std::unique_ptr<DataParallel> make_data_parallel(const SyncContext& ctx) {
  using config::DpMode;
  switch (const DpMode mode = ctx.cfg->parallel.dp_mode) {
    case DpMode::AllReduce: return std::make_unique<AllReduceSync>(ctx);
    case DpMode::Slim: return std::make_unique<SlimSync>(ctx);
    case DpMode::Quant: return std::make_unique<QuantSync>(ctx);
    case DpMode::Diloco:
    case DpMode::StreamingDiloco: return std::make_unique<DilocoSync>(ctx);
    case DpMode::PowerSgd: return std::make_unique<PowerSgdSync>(ctx);
    case DpMode::Zero1:
    case DpMode::Zero2:
    case DpMode::Zero3: return std::make_unique<ZeroSync>(ctx, config::zero_level(mode));
  }
  LOOM_CHECK(false, "unknown parallel.dp_mode");
}

}  // namespace loom::parallel
