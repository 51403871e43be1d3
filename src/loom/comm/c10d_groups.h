#pragma once
// Inside comm/ only: creating c10d process groups (gloo_group.cpp, nccl_group.cpp). Includes
// c10d headers, so only translation units that already use the precompiled torch header may
// include it.
#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace loom::comm {

c10::intrusive_ptr<c10d::Backend> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host);
c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);
// Empty when NCCL groups can be made here; else why not.
std::string nccl_unavailable_reason();

}  // namespace loom::comm
