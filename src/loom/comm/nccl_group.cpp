// c10d's ProcessGroupNCCL, in builds with CUDA (LOOM_HAVE_CUDA). NCCL runs its collectives on
// streams of its own; a Work's wait() makes the caller's current stream wait for them (events),
// so compute issued after wait() sees the result without a host synchronisation.
#include "loom/comm/c10d_groups.h"
#include "loom/common/error.h"

#if LOOM_HAVE_CUDA
#define USE_C10D_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace loom::comm {

std::string nccl_unavailable_reason() {
#if LOOM_HAVE_CUDA
  if (!torch::cuda::is_available()) return "no CUDA device is visible to this process";
  return {};
#else
  return "this loom was built without CUDA (no CUDA toolkit at build time)";
#endif
}

at::Device nccl_device() {
#if LOOM_HAVE_CUDA
  return {at::kCUDA, c10::cuda::current_device()};
#else
  LOOM_USAGE("--comm nccl is not available: ", nccl_unavailable_reason(),
             "; use --comm gloo or mpi");
#endif
}

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  if (auto why = nccl_unavailable_reason(); !why.empty())
    LOOM_USAGE("--comm nccl is not available: ", why, "; use --comm gloo or mpi");
#if LOOM_HAVE_CUDA
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  return {};
#endif
}

}  // namespace loom::comm
