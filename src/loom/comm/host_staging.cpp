#include "loom/comm/host_staging.h"

#include <torch/torch.h>

#include <utility>

namespace loom::comm {

Staged stage(const at::Tensor& t, bool input, bool output) {
  if (t.device().is_cpu()) return {t, {}, output};
  at::Tensor h =
      input ? t.to(torch::kCPU) : torch::empty(t.sizes(), t.options().device(torch::kCPU));
  return {h, t, output};
}

void copy_back_on_completion(Work& w, const std::vector<Staged>& staged) {
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  for (const auto& s : staged)
    if (s.device.defined() && s.output) back.emplace_back(s.device, s.host);
  if (back.empty()) return;
  w.then([back = std::move(back)] {
    for (const auto& [d, h] : back) d.copy_(h);
  });
}

}  // namespace loom::comm
