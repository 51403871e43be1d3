#pragma once
// Device tensors through host memory, for transports that move host memory only: Open MPI as
// Debian builds it (not CUDA-aware) and Gloo's TCP pairs. A CPU tensor passes through; a
// device tensor gets a host copy (filled from it when it is an input), and an output's copy
// goes back to the device when the operation has completed. NCCL needs none of this.
#include <ATen/core/Tensor.h>

#include <vector>

#include "loom/comm/work.h"

namespace loom::comm {

struct Staged {
  at::Tensor host;    // what the transport reads and writes
  at::Tensor device;  // undefined for CPU tensors
  bool output = false;
};

Staged stage(const at::Tensor& t, bool input, bool output);
// Arranges for every staged output to be copied back to its device when `w` completes.
void copy_back_on_completion(Work& w, const std::vector<Staged>& staged);

}  // namespace loom::comm
