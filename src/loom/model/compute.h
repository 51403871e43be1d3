#pragma once
// Where a rank computes and in what precision (train.device, train.precision).
//   device     cpu, or cuda:(local rank mod the GPUs this process sees), made current, so that
//              c10d's NCCL and every kernel default to it. Tensors are created on the device
//              of the tensors they derive from; only the model's first placement and the data
//              feed name the device.
//   bf16       the forward runs under autocast: matrix products in bf16 over the fp32 master
//              parameters (cast once per use, the cast's backward returns fp32 gradients), the
//              numerically touchy ops (softmax, norms, losses) in fp32.
#include <torch/torch.h>

#include <string>

#include "loom/config/config.h"

namespace loom::model {

struct Compute {
  torch::Device device = torch::kCPU;
  bool bf16 = false;
};

// This process's rank among the ranks on its machine: LOCAL_RANK (torchrun, loom's launcher),
// OMPI_COMM_WORLD_LOCAL_RANK (mpirun), SLURM_LOCALID (srun); 0 otherwise.
int local_rank();
// Why this process sees no GPU ("no GPU or no driver on this machine, ...", or that this loom
// was built without CUDA); empty when it sees one.
std::string why_no_gpu();
// The GPUs this process sees: how many, and the smallest one's memory and name; count 0
// without a GPU.
struct GpuMemory {
  int count = 0;
  double bytes = 0;
  std::string name;
};
GpuMemory gpu_memory();
// Throws UsageError naming the fix when `d` is cuda and no GPU is visible.
void check_device(config::Device d);
// The device of a rank with local rank `local` (throws UsageError naming the fix when cuda is
// asked for and no GPU is visible or this libtorch has no CUDA). Makes a GPU the current one.
torch::Device select_device(config::Device d, int local);
Compute compute_of(const config::Config& c, int local);
// Ranks of this machine that land on the same GPU (local world size > GPUs), as NCCL refuses.
bool gpu_shared(int local_world_size);

// bf16 autocast on the device's type for the scope's lifetime (nothing when !bf16); nests,
// and restores what was there before.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, bool bf16);
  explicit AutocastScope(const Compute& c) : AutocastScope(c.device, c.bf16) {}
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// Whether autocast is on for `device`'s type now (recomputation runs again as the forward did).
bool autocast_on(const torch::Device& device);

}  // namespace loom::model
