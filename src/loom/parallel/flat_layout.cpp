#include "loom/parallel/flat_layout.h"

#include "loom/common/error.h"

namespace loom::parallel {

FlatLayout FlatLayout::of(const std::vector<torch::Tensor>& params, int parts) {
  LOOM_CHECK(parts >= 1, "a flat layout needs at least one shard");
  FlatLayout l;
  l.parts = parts;
  for (const auto& p : params) {
    LOOM_CHECK(p.scalar_type() == torch::kFloat32,
               "sharded data parallelism needs fp32 parameters");
    l.slots.push_back({l.numel, p.numel(), p.sizes().vec()});
    l.numel += p.numel();
  }
  l.shard = (l.numel + parts - 1) / parts;
  l.padded = l.shard * parts;
  return l;
}

torch::Tensor FlatLayout::flatten(const std::vector<torch::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  const torch::Device device = params.empty() ? torch::kCPU : params.front().device();
  torch::Tensor flat = torch::zeros({padded}, torch::dtype(torch::kFloat32).device(device));
  for (size_t i = 0; i < slots.size(); ++i)
    flat.narrow(0, slots[i].offset, slots[i].numel).copy_(params[i].detach().reshape({-1}));
  return flat;
}

torch::Tensor FlatLayout::view(const torch::Tensor& flat, size_t i) const {
  return flat.narrow(0, slots[i].offset, slots[i].numel).view(slots[i].shape);
}

torch::Tensor FlatLayout::shard_of(const torch::Tensor& flat, int part) const {
  return flat.narrow(0, int64_t(part) * shard, shard);
}

}  // namespace loom::parallel
