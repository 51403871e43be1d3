#pragma once
// Host memory for a flat fp32 tensor: the tensor's own on the CPU, a pinned mirror on a device.
// The Slim-DP and quantized codecs work coordinate by coordinate on the host; on a GPU they
// copy the buffer in (pull) and back (push) once per exchange.
#include <torch/torch.h>

namespace loom::parallel {

class HostMirror {
 public:
  HostMirror() = default;
  explicit HostMirror(torch::Tensor t)
      : t_(std::move(t)),
        host_(t_.device().is_cpu()
                  ? t_
                  : torch::empty(
                        t_.sizes(),
                        torch::dtype(torch::kFloat32).pinned_memory(torch::cuda::is_available()))) {
  }
  float* data() const { return host_.data_ptr<float>(); }
  void pull() {
    if (!t_.device().is_cpu()) host_.copy_(t_);
  }
  void push() {
    if (!t_.device().is_cpu()) t_.copy_(host_);
  }

 private:
  torch::Tensor t_, host_;
};

}  // namespace loom::parallel
