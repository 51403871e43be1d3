#include "loom/model/compute.h"

#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>
#if LOOM_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <cstdlib>

#include "loom/common/error.h"

namespace loom::model {

int local_rank() {
  for (const char* v : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return 0;
}

namespace {

int cuda_count() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

}  // namespace

std::string why_no_gpu() {
  if (cuda_count() > 0) return {};
  // (torch::hasCUDA() cannot tell the two apart: it is false in a CUDA build without a GPU.)
  return LOOM_HAVE_CUDA ? "no GPU or no driver on this machine, or CUDA_VISIBLE_DEVICES hides them"
                        : "this loom was built without CUDA: no CUDA toolkit at build time";
}

GpuMemory gpu_memory() {
  GpuMemory g;
#if LOOM_HAVE_CUDA
  g.count = cuda_count();
  for (int i = 0; i < g.count; ++i) {
    const auto* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    if (i == 0 || static_cast<double>(p->totalGlobalMem) < g.bytes) {
      g.bytes = static_cast<double>(p->totalGlobalMem);
      g.name = p->name;
    }
  }
#endif
  return g;
}

void check_device(config::Device d) {
  if (d != config::Device::Cuda) return;
  if (const auto why = why_no_gpu(); !why.empty())
    LOOM_USAGE("device cuda (--device, train.device), but this process sees no GPU (", why,
               "); use --device cpu");
}

torch::Device select_device(config::Device d, int local) {
  check_device(d);
  if (d == config::Device::Cpu) return torch::kCPU;
  const int n = cuda_count();
  const auto index = static_cast<c10::DeviceIndex>(local % n);
  at::accelerator::setDeviceIndex(index);
  return {torch::kCUDA, index};
}

Compute compute_of(const config::Config& c, int local) {
  return {select_device(c.train.device, local), c.train.precision == config::Precision::Bf16};
}

bool gpu_shared(int local_world_size) {
  const int n = cuda_count();
  return n > 0 && local_world_size > n;
}

AutocastScope::AutocastScope(const torch::Device& device, bool bf16) {
  if (!bf16) return;
  active_ = true;
  type_ = device.type();
  was_enabled_ = at::autocast::is_autocast_enabled(type_);
  was_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast cache holds bf16 copies of the weights; it lives as long as the outermost scope.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, was_enabled_);
  at::autocast::set_autocast_dtype(type_, was_dtype_);
}

bool autocast_on(const torch::Device& device) {
  return at::autocast::is_autocast_enabled(device.type());
}

}  // namespace loom::model
