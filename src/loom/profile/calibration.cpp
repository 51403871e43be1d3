#include "loom/profile/calibration.h"

#include <ATen/CPUGeneratorImpl.h>

#include "loom/model/block_timing.h"

namespace loom::profile {

Calibration::Calibration(const config::ModelConfig& model, int64_t micro_batch, uint64_t seed)
    : micro_batch_(micro_batch) {
  // build() seeds torch's global generator; restore it so the run draws what it would have.
  at::Generator global = at::detail::getDefaultCPUGenerator();
  torch::Tensor state = global.get_state();
  model::Model m = model::build(model, seed);
  global.set_state(state);
  layer_ = m.blocks.at(1);  // blocks[0] is the embedding (gpt, llama)
  at::Generator own = at::make_generator<at::CPUGeneratorImpl>(seed + 7919);
  input_ = at::randn({micro_batch, model.seq_len, model.width}, own);
  grad_ = at::randn({micro_batch, model.seq_len, model.width}, own);
}

Calibration::Times Calibration::run(comm::Backend& world, int reps) {
  const int n = world.size();
  auto median_time = [&] {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {  // timed as `loom profile` times it: in flight
      const model::InFlightTimes f = model::time_in_flight(*layer_, input_, none_, grad_);
      t.push_back(model::median_of(f.forward_s) + model::median_of(f.backward_s));
    }
    return model::median_of(t);
  };
  double mine[2] = {0, 0};  // alone, loaded
  for (int q = 0; q < n; ++q) {
    world.barrier()->wait();
    if (q == world.rank()) mine[0] = median_time();
  }
  world.barrier()->wait();
  mine[1] = median_time();
  std::vector<double> all(2 * n);
  world.all_gather(mine, all.data(), 2, comm::DType::Float64)->wait();
  Times t;
  for (int q = 0; q < n; ++q) {
    t.alone.push_back(all[2 * q]);
    t.loaded.push_back(all[2 * q + 1]);
  }
  return t;
}

}  // namespace loom::profile
