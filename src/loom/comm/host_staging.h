#pragma once
// Tensors through the memory a transport moves: host memory for Open MPI as Debian builds it
// (not CUDA-aware) and Gloo's TCP pairs, the rank's GPU for NCCL. A tensor already there
// passes through; another gets a copy there (filled from it when it is an input), and an
// output's copy goes back to the caller's tensor when the operation has completed.
#include <ATen/core/Tensor.h>

#include <vector>

#include "loom/comm/work.h"

namespace loom::comm {

struct Staged {
  at::Tensor wire;    // what the transport reads and writes
  at::Tensor origin;  // the caller's tensor when it is elsewhere; undefined when it is `wire`
  bool output = false;
};

Staged stage(const at::Tensor& t, bool input, bool output, at::Device wire = at::kCPU);
// Arranges for every staged output to be copied back to its origin when `w` completes.
void copy_back_on_completion(Work& w, const std::vector<Staged>& staged);

}  // namespace loom::comm
