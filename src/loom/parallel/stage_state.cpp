#include "loom/parallel/stage_state.h"

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

torch::Tensor piece_of(const torch::Tensor& t, const DataParallel::Piece& p) {
  return t.view({-1}).slice(0, p.at, p.at + p.length);
}

}  // namespace

void save_stage_state(DataParallel& mode, const StageOptimizer& opt, ChunkWriter& w) {
  const auto& named = mode.stage().params();
  const int replica = mode.per_replica() ? mode.dp_rank() : -1;
  const std::vector<torch::Tensor> tensors = mode.optimized_params();
  const std::vector<StageOptimizer::State> state = opt.state();
  for (const auto& p : mode.pieces()) {
    const std::string name = checkpoint_name(named[p.param]);
    w.put("param/" + name, replica, p.begin, mode.param_shape(p.param),
          piece_of(tensors[p.tensor], p));
    if (!state.empty())
      for (const auto& [key, t] : state[p.tensor])
        w.put(key + "/" + name, replica, p.begin, mode.param_shape(p.param), piece_of(t, p));
  }
  if (!state.empty())
    w.put("optimizer.step", replica, 0, {1}, torch::tensor({opt.steps()}, torch::kInt64));
  mode.save(w);
}

void load_stage_state(DataParallel& mode, StageOptimizer& opt, const ChunkReader& r) {
  torch::NoGradGuard no_grad;
  const auto& named = mode.stage().params();
  const int replica = mode.per_replica() ? mode.dp_rank() : -1;
  const std::vector<torch::Tensor> tensors = mode.optimized_params();
  const std::vector<DataParallel::Piece> pieces = mode.pieces();
  mode.load(r);
  for (const auto& p : pieces) {
    const std::string name = checkpoint_name(named[p.param]);
    if (!r.get("param/" + name, replica, p.begin, piece_of(tensors[p.tensor], p)))
      LOOM_USAGE("checkpoint lacks parameter '", name,
                 "'; it was written for another model (resume with the model that wrote it)");
  }
  torch::Tensor steps = torch::zeros({1}, torch::kInt64);
  if (!pieces.empty() && r.get("optimizer.step", replica, 0, steps)) {
    std::vector<StageOptimizer::State> state(tensors.size());
    for (const auto& key : opt.state_keys()) {
      for (size_t t = 0; t < tensors.size(); ++t) state[t][key] = torch::zeros_like(tensors[t]);
      for (const auto& p : pieces) {
        const std::string name = checkpoint_name(named[p.param]);
        if (!r.get(key + "/" + name, replica, p.begin, piece_of(state[p.tensor][key], p)))
          LOOM_USAGE("checkpoint lacks optimizer state '", key, "' of '", name,
                     "'; it was written with another optimizer");
      }
    }
    opt.set_state(state, steps.item<int64_t>());
  }
  mode.after_load();
}

}  // namespace loom::parallel
