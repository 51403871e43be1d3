#include "loom/comm/host_staging.h"

#include <torch/torch.h>

#include <utility>

namespace loom::comm {

Staged stage(const at::Tensor& t, bool input, bool output, at::Device wire) {
  if (t.device() == wire) return {t, {}, output};
  at::Tensor w = input ? t.to(wire) : torch::empty(t.sizes(), t.options().device(wire));
  return {w, t, output};
}

void copy_back_on_completion(Work& w, const std::vector<Staged>& staged) {
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  for (const auto& s : staged)
    if (s.origin.defined() && s.output) back.emplace_back(s.origin, s.wire);
  if (back.empty()) return;
  w.then([back = std::move(back)] {
    for (const auto& [origin, wire] : back) origin.copy_(wire);
  });
}

}  // namespace loom::comm
