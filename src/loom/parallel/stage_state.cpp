#include "loom/parallel/stage_state.h"

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

torch::Tensor piece_of(const torch::Tensor& t, const DataParallel::Piece& p) {
  return t.view({-1}).slice(0, p.at, p.at + p.length);
}

// Reads `out` as replica `replica` holds it, or (replica < -1) the mean over `count` replicas,
// summed in replica order (every rank gets the same bits).
bool get_or_mean(const ChunkReader& r, const std::string& name, int replica, int count,
                 int64_t begin, const torch::Tensor& out) {
  if (replica >= -1) return r.get(name, replica, begin, out);
  torch::Tensor one = torch::empty_like(out), sum = torch::zeros_like(out);
  for (int k = 0; k < count; ++k) {
    if (!r.get(name, k, begin, one)) return false;
    sum += one;
  }
  out.copy_(sum / count);
  return true;
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

void load_stage_state(DataParallel& mode, StageOptimizer& opt, const ChunkReader& r,
                      int saved_replicas) {
  torch::NoGradGuard no_grad;
  const auto& named = mode.stage().params();
  const std::vector<torch::Tensor> tensors = mode.optimized_params();
  const std::vector<DataParallel::Piece> pieces = mode.pieces();
  // This replica's own copy, the shared one (-1), or the mean of the saved replicas (-2).
  const int count = saved_replicas;
  int replica = mode.per_replica() ? mode.dp_rank() : -1;  // (a shared copy serves any replica)
  if (count > 0 && !(mode.per_replica() && count == mode.dp_size())) replica = -2;
  mode.load(r);
  for (const auto& p : pieces) {
    const std::string name = checkpoint_name(named[p.param]);
    if (!get_or_mean(r, "param/" + name, replica, count, p.begin, piece_of(tensors[p.tensor], p)))
      LOOM_USAGE("checkpoint lacks parameter '", name,
                 "'; it was written for another model (resume with the model that wrote it)");
  }
  torch::Tensor steps = torch::zeros({1}, torch::kInt64);
  const int step_replica = replica == -2 ? 0 : replica;  // the replicas step together
  if (!pieces.empty() && r.get("optimizer.step", step_replica, 0, steps)) {
    std::vector<StageOptimizer::State> state(tensors.size());
    for (const auto& key : opt.state_keys()) {
      for (size_t t = 0; t < tensors.size(); ++t) state[t][key] = torch::zeros_like(tensors[t]);
      for (const auto& p : pieces) {
        const std::string name = checkpoint_name(named[p.param]);
        if (!get_or_mean(r, key + "/" + name, replica, count, p.begin,
                         piece_of(state[p.tensor][key], p)))
          LOOM_USAGE("checkpoint lacks optimizer state '", key, "' of '", name,
                     "'; it was written with another optimizer");
      }
    }
    opt.set_state(std::move(state), steps.item<int64_t>());
  }
  mode.after_load();
}

void want_stage_state(const DataParallel& mode, const StageOptimizer& opt, ChunkFilter& f,
                      bool shards) {
  const auto& named = mode.stage().params();
  for (const auto& p : named) f.want_param(p.name);
  if (!shards) return;
  std::vector<std::string> keys = opt.state_keys();
  keys.push_back("param");
  for (const auto& p : mode.pieces())
    for (const auto& key : keys)
      f.want_range(key + "/" + checkpoint_name(named[p.param]), p.begin, p.begin + p.length);
}

}  // namespace loom::parallel
